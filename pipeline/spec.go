package pipeline

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// Spec is a parsed pipeline file: what it declares, before anything is built.
type Spec struct {
	// File is the name errors use; Dir is the directory relative paths are resolved against.
	File string
	Dir  string

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

// Load reads and parses a pipeline file.
func Load(path string) (*Spec, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, src)
}

// Parse parses pipeline source; name is used in errors and to resolve relative paths.
func Parse(name string, src []byte) (*Spec, error) {
	s := &Spec{File: name, Dir: filepath.Dir(name), loc: newLocator(src)}
	el := &errList{file: name, loc: s.loc}
	var raw map[string]any
	if _, err := toml.Decode(string(src), &raw); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, Errors{{File: name, Line: pe.Position.Line, Msg: "invalid TOML: " + pe.Message}}
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
	if _, ok := raw["model"]; !ok {
		el.add("", "no [model] table: declare path = \"FILE.gguf\" or builtin = \"NAME\"")
	}
	if _, ok := raw["generation"]; !ok {
		s.Generation = Generation{MaxNewTokens: DefaultMaxNewTokens, N: 1}
	}
	if s.Order == "" {
		s.Order = "file"
	}
	if s.Strategy.Type == "" && s.Strategy.Path == "" {
		s.Strategy = PartSpec{Type: "sample", Path: "strategy", Params: map[string]any{}}
	}
	sort.SliceStable(el.errs, func(i, j int) bool { return el.errs[i].Line < el.errs[j].Line })
	if err := el.err(); err != nil {
		return s, err
	}
	return s, nil
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
	intIn := func(k string, lo, hi int) (int, bool) {
		p := "generation." + k
		i, ok := toInt(m[k])
		if !ok {
			el.add(p, " = %v: must be an integer", m[k])
			return 0, false
		}
		if i < lo || i > hi {
			el.add(p, " = %d: must be in [%d, %d]", i, lo, hi)
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
			if i, ok := intIn(k, 0, 1<<24); ok {
				g.MaxNewTokens = i
			}
		case "n":
			if i, ok := intIn(k, 1, 1024); ok {
				g.N = i
			}
		case "seed":
			if i, ok := intIn(k, 0, math.MaxInt); ok {
				seed := uint64(i)
				g.Seed = &seed
			}
		case "top_logprobs":
			if i, ok := intIn(k, 0, 100); ok {
				g.TopLogprobs = i
			}
		case "trace":
			if i, ok := intIn(k, 0, 100); ok {
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
