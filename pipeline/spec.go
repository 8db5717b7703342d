package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// Spec is a parsed pipeline file: what it declares, before anything is built.
type Spec struct {
	// File is the name errors use; Dir is the directory relative paths are resolved against.
	File string
	Dir  string
	// Source is the TOML text the spec was parsed from.
	Source string

	Model      ModelSpec
	DraftModel *ModelSpec
	Generation Generation
	Strategy   PartSpec
	Processors []PartSpec
	Stopping   []PartSpec
	Plugins    []PluginSpec
	// Order is the processor order preset: "file" (the default: as written), "hf" or
	// "llama.cpp" (see Orders).
	Order string

	loc *locator
	// errs are the problems Parse found; Build reports them together with its own.
	errs Errors
	// hasModel records whether the file has a [model] table.
	hasModel bool
}

// ModelSpec is the [model] (or [draft_model]) table: a GGUF file or an embedded model.
type ModelSpec struct {
	// Path is a GGUF file (relative to the pipeline file); Builtin names an embedded model.
	// Exactly one is set.
	Path    string
	Builtin string
	// Options holds the other keys of the table (cache settings, threads, …), checked by the
	// model loader.
	Options map[string]any
	path    string // field path for errors: "model" or "draft_model"
}

// SetOption sets the option key of the table to v (a command-line setting replacing the
// file's), checked by the model loader as the file's options are.
func (m *ModelSpec) SetOption(key string, v any) {
	if m.Options == nil {
		m.Options = map[string]any{}
	}
	m.Options[key] = v
}

// SetModelsOption sets the option key to v on [model] and, when the pipeline has one,
// [draft_model] (a command-line setting for every model file, such as --no-mmap).
func (s *Spec) SetModelsOption(key string, v any) {
	s.Model.SetOption(key, v)
	if s.DraftModel != nil {
		s.DraftModel.SetOption(key, v)
	}
}

// Generation holds the request defaults of [generation].
type Generation struct {
	MaxNewTokens int
	Seed         *uint64
	N            int
	IgnoreEOS    bool
	Logprobs     bool
	TopLogprobs  int
	Trace        int
}

// PartSpec is one declared part: its type name and parameters.
type PartSpec struct {
	Type   string
	Params map[string]any
	// Path is the field path, e.g. "processors[2]".
	Path string
}

// PluginSpec is one [[plugins]] entry.
type PluginSpec struct {
	Name   string
	Path   string
	Args   []string
	Env    map[string]string
	SHA256 string
	// Timeout is the per-call deadline, e.g. "2s" (empty: the host's default).
	Timeout string
	// StartTimeout bounds the start-up, handshake included, e.g. "30s" (empty: the host's
	// default).
	StartTimeout string
	Config       map[string]any
	Index        int
}

// DefaultMaxNewTokens is used when [generation] does not set max_new_tokens.
const DefaultMaxNewTokens = 128

// MaxFileBytes is the largest pipeline file Load reads: a larger file, or a stream that goes
// on past it (a device such as /dev/zero), is an error.
const MaxFileBytes = 16 << 20

// Load reads and parses a pipeline file.
func Load(path string) (*Spec, error) {
	src, err := readBounded(path, MaxFileBytes, "a pipeline file")
	if err != nil {
		return nil, err
	}
	return Parse(path, src)
}

// readBounded reads the file at path, what it is (for errors) holding at most limit bytes: a
// regular file larger than that is refused before it is read, and no more than limit+1 bytes
// are read of a stream (a pipe; a device such as /dev/zero, which never ends). Its errors
// name path.
func readBounded(path string, limit int, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tooLarge := fmt.Sprintf("more than the %d MiB %s may have", limit>>20, what)
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > int64(limit) {
		return nil, fmt.Errorf("%s: %d bytes, %s", path, fi.Size(), tooLarge)
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %w", path, err)
	case len(data) > limit:
		return nil, fmt.Errorf("%s: %s", path, tooLarge)
	}
	return data, nil
}

// Parse parses pipeline source; name is used in errors and to resolve relative paths. On
// errors in the file's values it returns the spec as well as the errors, so that Build can
// report them together with those only building finds; on invalid TOML the spec is nil.
func Parse(name string, src []byte) (*Spec, error) {
	s := &Spec{File: name, Dir: filepath.Dir(name), Source: string(src), loc: newLocator(src)}
	el := &errList{file: name, loc: s.loc}
	raw, err := decodeTOML(src)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			line := pe.Position.Line
			if st := pe.Position.Start; st >= 0 && st < len(src) {
				// The line of the offending byte: the parser counts an unexpected newline as
				// the start of the next line, while the mistake is on the line it ends.
				line = 1 + bytes.Count(src[:st], []byte("\n"))
			}
			return nil, Errors{{File: name, Line: line, Msg: "invalid TOML: " + pe.Message}}
		}
		return nil, Errors{{File: name, Msg: "invalid TOML: " + err.Error()}}
	}
	for _, k := range sortedKeys(raw) {
		v := raw[k]
		switch k {
		case "model":
			s.Model = parseModel(el, "model", v)
		case "draft_model":
			m := parseModel(el, "draft_model", v)
			s.DraftModel = &m
		case "generation":
			s.Generation = parseGeneration(el, v)
		case "strategy":
			s.Strategy = parsePart(el, "strategy", v)
		case "processors":
			s.Processors = parseParts(el, "processors", v)
		case "stopping":
			s.Stopping = parseParts(el, "stopping", v)
		case "plugins":
			s.Plugins = parsePlugins(el, v)
		case "name", "description":
			if _, ok := v.(string); !ok {
				el.add(k, "must be a string")
			}
		case "order":
			o, ok := v.(string)
			switch {
			case !ok:
				el.add(k, " = %v: must be a string: %s", v, orderNames())
			case !slices.Contains(Orders, o):
				el.add(k, " = %q: unknown order (known: %s)", o, orderNames())
			default:
				s.Order = o
			}
		default:
			el.add(k, "unknown table or key (known: model, draft_model, generation, strategy, processors, stopping, plugins, order, name, description)")
		}
	}
	_, s.hasModel = raw["model"]
	if _, ok := raw["generation"]; !ok {
		s.Generation = Generation{MaxNewTokens: DefaultMaxNewTokens, N: 1}
	}
	if s.Order == "" {
		s.Order = "file"
	}
	if s.Strategy.Type == "" && s.Strategy.Path == "" {
		s.Strategy = PartSpec{Type: "sample", Path: "strategy", Params: map[string]any{}}
	}
	el.sort()
	s.errs = el.errs
	if err := el.err(); err != nil {
		return s, err
	}
	return s, nil
}

// decodeTOML decodes a pipeline's source. TOML integers are signed 64-bit, so a seed above
// 2^63-1 written as a plain integer does not decode; such a seed literal is read as the string
// of its digits (which [generation] seed also accepts) instead of failing.
func decodeTOML(src []byte) (map[string]any, error) {
	text := string(src)
	for {
		var raw map[string]any
		_, err := toml.Decode(text, &raw)
		var pe toml.ParseError
		if err == nil || !errors.As(err, &pe) || pe.LastKey != "generation.seed" {
			return raw, err
		}
		start, end := pe.Position.Start, pe.Position.Start+pe.Position.Len
		if start < 0 || end > len(text) || start >= end {
			return raw, err
		}
		lit := strings.ReplaceAll(text[start:end], "_", "")
		if _, perr := strconv.ParseUint(lit, 10, 64); perr != nil || lit[0] == '+' {
			return raw, err
		}
		text = text[:start] + strconv.Quote(lit) + text[end:]
	}
}

// Line returns the line that declares a field path, or 0.
func (s *Spec) Line(path string) int { return s.loc.line(path) }

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func table(el *errList, path string, v any) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		el.add(path, "must be a table")
	}
	return m, ok
}

func parseModel(el *errList, path string, v any) ModelSpec {
	ms := ModelSpec{path: path, Options: map[string]any{}}
	m, ok := table(el, path, v)
	if !ok {
		return ms
	}
	for _, k := range sortedKeys(m) {
		switch k {
		case "path", "builtin":
			str, ok := m[k].(string)
			if !ok || str == "" {
				el.add(path+"."+k, "must be a non-empty string")
				continue
			}
			if k == "path" {
				ms.Path = str
			} else {
				ms.Builtin = str
			}
		default:
			ms.Options[k] = m[k]
		}
	}
	if (ms.Path == "") == (ms.Builtin == "") {
		el.add(path, "set exactly one of path (a GGUF file) and builtin (an embedded model)")
	}
	return ms
}

func parseGeneration(el *errList, v any) Generation {
	g := Generation{MaxNewTokens: DefaultMaxNewTokens, N: 1}
	m, ok := table(el, "generation", v)
	if !ok {
		return g
	}
	intIn := func(k string) (int, bool) {
		p := "generation." + k
		i, ok := toInt(m[k])
		if !ok {
			el.add(p, " = %v: must be an integer", m[k])
			return 0, false
		}
		if reason := generationLimits[k].check(i); reason != "" {
			el.add(p, " = %d: %s", i, reason)
			return 0, false
		}
		return i, true
	}
	boolOf := func(k string) bool {
		b, ok := m[k].(bool)
		if !ok {
			el.add("generation."+k, " = %v: must be true or false", m[k])
		}
		return b
	}
	for _, k := range sortedKeys(m) {
		switch k {
		case "max_new_tokens":
			if i, ok := intIn(k); ok {
				g.MaxNewTokens = i
			}
		case "n":
			if i, ok := intIn(k); ok {
				g.N = i
			}
		case "seed":
			if seed, err := parseSeed(m[k]); err != nil {
				el.add("generation.seed", " = %s: %v", formatTOML(m[k]), err)
			} else {
				g.Seed = &seed
			}
		case "top_logprobs":
			if i, ok := intIn(k); ok {
				g.TopLogprobs = i
			}
		case "trace":
			if i, ok := intIn(k); ok {
				g.Trace = i
			}
		case "ignore_eos":
			g.IgnoreEOS = boolOf(k)
		case "logprobs":
			g.Logprobs = boolOf(k)
		default:
			el.add("generation."+k, "unknown key (known: max_new_tokens, seed, n, ignore_eos, logprobs, top_logprobs, trace)")
		}
	}
	return g
}

// limit is the inclusive range of an integer setting.
type limit struct{ lo, hi int }

// check returns why i is out of range, or "".
func (l limit) check(i int) string {
	if i < l.lo || i > l.hi {
		return fmt.Sprintf("must be in [%d, %d]", l.lo, l.hi)
	}
	return ""
}

// generationLimits are the ranges of the [generation] integers; the command-line overrides
// are held to the same ranges.
var generationLimits = map[string]limit{
	"max_new_tokens": {0, 1 << 24},
	"n":              {1, 1024},
	"top_logprobs":   {0, 100},
	"trace":          {0, 100},
}

// ParseSeed parses a seed: a decimal integer in [0, 2^64-1]. It is what `--seed` and a
// [generation] seed written as a string accept.
func ParseSeed(s string) (uint64, error) {
	u, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("must be an integer in [0, %d]", uint64(math.MaxUint64))
	}
	return u, nil
}

// parseSeed reads [generation] seed: a non-negative integer, or a string of decimal digits
// (for seeds above 2^63-1, which TOML integers cannot hold).
func parseSeed(v any) (uint64, error) {
	switch x := v.(type) {
	case int64:
		if x < 0 {
			return 0, fmt.Errorf("must be an integer in [0, %d]", uint64(math.MaxUint64))
		}
		return uint64(x), nil
	case string:
		return ParseSeed(x)
	}
	return 0, fmt.Errorf("must be an integer in [0, %d] (or a string of its digits)", uint64(math.MaxUint64))
}

// formatTOML writes a decoded value the way the file spells it (strings quoted).
func formatTOML(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

func parsePart(el *errList, path string, v any) PartSpec {
	ps := PartSpec{Path: path, Params: map[string]any{}}
	m, ok := table(el, path, v)
	if !ok {
		return ps
	}
	for k, val := range m {
		if k == "type" {
			s, ok := val.(string)
			if !ok || s == "" {
				el.add(path+".type", "must be a non-empty string")
			}
			ps.Type = s
			continue
		}
		ps.Params[k] = val
	}
	if _, ok := m["type"]; !ok {
		el.add(path, "missing type")
	}
	return ps
}

func parseParts(el *errList, path string, v any) []PartSpec {
	list, ok := v.([]map[string]any)
	if !ok {
		el.add(path, "must be an array of tables: write [[%s]] before each entry", path)
		return nil
	}
	out := make([]PartSpec, len(list))
	for i, m := range list {
		out[i] = parsePart(el, fmt.Sprintf("%s[%d]", path, i), m)
	}
	return out
}

func parsePlugins(el *errList, v any) []PluginSpec {
	list, ok := v.([]map[string]any)
	if !ok {
		el.add("plugins", "must be an array of tables: write [[plugins]] before each entry")
		return nil
	}
	var out []PluginSpec
	for i, m := range list {
		p := PluginSpec{Index: i}
		path := fmt.Sprintf("plugins[%d]", i)
		str := func(k string) string {
			s, ok := m[k].(string)
			if !ok {
				el.add(path+"."+k, " = %v: must be a string", m[k])
			}
			return s
		}
		for _, k := range sortedKeys(m) {
			switch k {
			case "name":
				p.Name = str(k)
			case "path":
				p.Path = str(k)
			case "sha256":
				p.SHA256 = strings.ToLower(str(k))
			case "timeout":
				p.Timeout = str(k)
			case "start_timeout":
				p.StartTimeout = str(k)
			case "args":
				list, ok := m[k].([]any)
				for _, a := range list {
					s, isStr := a.(string)
					ok = ok && isStr
					p.Args = append(p.Args, s)
				}
				if !ok {
					el.add(path+".args", "must be a list of strings")
				}
			case "env":
				t, ok := m[k].(map[string]any)
				p.Env = map[string]string{}
				for ek, ev := range t {
					s, isStr := ev.(string)
					ok = ok && isStr
					p.Env[ek] = s
				}
				if !ok {
					el.add(path+".env", "must be a table of strings")
				}
			case "config":
				t, ok := m[k].(map[string]any)
				if !ok {
					el.add(path+".config", "must be a table")
				}
				p.Config = t
			default:
				el.add(path+"."+k, "unknown key (known: name, path, args, env, sha256, timeout, start_timeout, config)")
			}
		}
		if p.Name == "" {
			el.add(path, "missing name")
		}
		if p.Path == "" {
			el.add(path, "missing path")
		}
		if p.SHA256 == "" {
			el.add(path, "missing sha256: loom runs no plugin binary it cannot verify (get the line with `loom plugins hash PATH`)")
		}
		out = append(out, p)
	}
	return out
}
