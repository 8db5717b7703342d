package pipeline

import (
	"fmt"
	"strings"
)

// locator maps field paths ("processors[2].p", "model.path", "strategy") to the line of the
// source that declares them, so errors can say where. It reads the file line by line the way
// TOML lays out a pipeline: table headers, array-of-table headers and key = value lines.
type locator struct {
	lines map[string]int
	// values maps the path of a key whose value is a string to where its text begins (for a
	// multi-line string whose delimiter ends the line, the next line: TOML drops that newline).
	values map[string]position
}

// position is a 1-based line and byte column of the source.
type position struct{ line, col int }

func newLocator(src []byte) *locator {
	l := &locator{lines: map[string]int{}, values: map[string]position{}}
	arrays := map[string]int{} // array-of-tables name → index of its current element
	current := ""
	inMultiline := ""
	for n, line := range strings.Split(string(src), "\n") {
		lineNo := n + 1
		if inMultiline != "" {
			if strings.Count(line, inMultiline)%2 == 1 {
				inMultiline = ""
			}
			continue
		}
		s := strings.TrimSpace(stripComment(line))
		switch {
		case s == "":
		case strings.HasPrefix(s, "[["):
			name := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(s, "[["), "]]"))
			if _, ok := arrays[name]; ok {
				arrays[name]++
			} else {
				arrays[name] = 0
			}
			current = fmt.Sprintf("%s[%d]", name, arrays[name])
			l.set(current, lineNo)
		case strings.HasPrefix(s, "["):
			name := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
			head, rest, _ := strings.Cut(name, ".")
			if i, ok := arrays[head]; ok {
				name = fmt.Sprintf("%s[%d]", head, i)
				if rest != "" {
					name += "." + rest
				}
			}
			current = name
			l.set(current, lineNo)
		default:
			key, value, ok := strings.Cut(s, "=")
			if !ok {
				continue
			}
			key = strings.Trim(strings.TrimSpace(key), `"'`)
			path := key
			if current != "" {
				path = current + "." + key
			}
			l.set(path, lineNo)
			if p, ok := valueStart(line, lineNo); ok {
				if _, seen := l.values[path]; !seen {
					l.values[path] = p
				}
			}
			for _, q := range []string{`"""`, `'''`} {
				if strings.Count(value, q)%2 == 1 {
					inMultiline = q
				}
			}
		}
	}
	return l
}

// valueStart returns where the text of the string value on a key = value line begins.
func valueStart(line string, lineNo int) (position, bool) {
	eq := strings.IndexByte(line, '=')
	if eq < 0 {
		return position{}, false
	}
	i := eq + 1
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	rest := line[i:]
	for _, q := range []string{`"""`, `'''`, `"`, `'`} {
		if !strings.HasPrefix(rest, q) {
			continue
		}
		if len(q) == 3 && strings.TrimRight(rest[3:], "\r") == "" {
			return position{lineNo + 1, 1}, true
		}
		return position{lineNo, i + len(q) + 1}, true
	}
	return position{}, false
}

// value returns where the text of path's string value begins, if the source writes it as a
// key = value line.
func (l *locator) value(path string) (position, bool) {
	p, ok := l.values[path]
	return p, ok
}

func (l *locator) set(path string, line int) {
	if _, ok := l.lines[path]; !ok {
		l.lines[path] = line
	}
}

// line returns the line of path, or of its closest declared ancestor, or 0.
func (l *locator) line(path string) int {
	for path != "" {
		if n, ok := l.lines[path]; ok {
			return n
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

// stripComment removes a # comment that is not inside a string.
func stripComment(line string) string {
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == '\\' && quote == '"' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '#':
			return line[:i]
		}
	}
	return line
}
