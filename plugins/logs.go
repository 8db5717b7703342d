package plugins

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
)

// logState follows one plugin's stderr: after a Go panic header every line is an error.
type logState struct{ inPanic bool }

// log logs one line of plugin stderr. A JSON object with "@message" and "@level" (go-hclog's
// and the sdk's format) is logged at its level with its other fields; anything else — plain
// text, or JSON of any other shape, like {"@message": 42} — is logged as text. Nothing a
// plugin writes can make the host panic.
func (s *logState) log(l hclog.Logger, t *tail, line []byte) {
	t.add(line)
	if msg, level, args, ok := parseLogJSON(line); ok {
		l.Log(level, msg, args...)
		return
	}
	text := clean(line)
	if strings.HasPrefix(text, "panic: ") || strings.HasPrefix(text, "fatal error: ") {
		s.inPanic = true
	}
	if s.inPanic {
		l.Error(text)
		return
	}
	l.Info(text)
}

// logLine logs a line of another stream (stdout after the handshake) as text.
func logLine(l hclog.Logger, t *tail, stream string, line []byte) {
	t.add(line)
	l.Info(clean(line), "stream", stream)
}

func parseLogJSON(line []byte) (msg string, level hclog.Level, args []any, ok bool) {
	line = bytes.TrimSpace(line)
	if len(line) < 2 || line[0] != '{' {
		return "", 0, nil, false
	}
	var m map[string]any
	if json.Unmarshal(line, &m) != nil {
		return "", 0, nil, false
	}
	raw, has := m["@message"]
	if !has {
		return "", 0, nil, false
	}
	msg = clean([]byte(fmt.Sprint(raw)))
	level = hclog.Info
	if lv, isStr := m["@level"].(string); isStr {
		if l := hclog.LevelFromString(lv); l != hclog.NoLevel && l != hclog.Off {
			level = l
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if !strings.HasPrefix(k, "@") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, clean([]byte(k)), cleanValue(m[k]))
	}
	return msg, level, args, true
}

func cleanValue(v any) any {
	switch x := v.(type) {
	case string:
		return clean([]byte(x))
	case float64, bool, nil:
		return x
	}
	b, _ := json.Marshal(v)
	return clean(b)
}

// clean makes plugin text safe to write to the host's log: valid UTF-8, no control
// characters (no terminal escapes, no forged log lines).
func clean(b []byte) string {
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		b = b[n:]
		switch {
		case r == utf8.RuneError && n == 1:
			sb.WriteRune('\uFFFD')
		case r == '\t':
			sb.WriteRune(' ')
		case unicode.IsControl(r):
			fmt.Fprintf(&sb, "\\x%02x", r)
		default:
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

// tail keeps a plugin's last lines of output for error messages.
type tail struct {
	mu    sync.Mutex
	lines []string
}

const tailLines = 12

func (t *tail) add(line []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := clean(line)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	t.lines = append(t.lines, s)
	if len(t.lines) > tailLines {
		t.lines = t.lines[len(t.lines)-tailLines:]
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

// last returns the most telling recent line: a panic header if any, else the last line.
func (t *tail) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range t.lines {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
			return l
		}
	}
	if len(t.lines) == 0 {
		return ""
	}
	return t.lines[len(t.lines)-1]
}

// demoted is a logger for go-plugin's own messages: its Info lines (a plugin started, exited)
// become Debug, so that a normal run stays quiet.
type demoted struct{ hclog.Logger }

func (d demoted) Info(msg string, args ...any) { d.Logger.Debug(msg, args...) }

func (d demoted) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Info {
		level = hclog.Debug
	}
	d.Logger.Log(level, msg, args...)
}

func (d demoted) Named(name string) hclog.Logger { return demoted{d.Logger.Named(name)} }

func (d demoted) With(args ...any) hclog.Logger { return demoted{d.Logger.With(args...)} }
