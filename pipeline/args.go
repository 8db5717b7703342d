package pipeline

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/loomlm/loom/core"
)

// Env is what part constructors may need beyond their parameters.
type Env struct {
	// Tokenizer and Model are the pipeline's model; DraftModel and DraftTokenizer the
	// [draft_model], when declared.
	Tokenizer      core.Tokenizer
	Model          core.Model
	DraftModel     core.Model
	DraftTokenizer core.Tokenizer
	// modelFailed is set while building parts after a model failed to open.
	modelFailed bool
	// Dir is the directory of the pipeline file, against which parts resolve relative paths
	// (a grammar_file); empty means the working directory.
	Dir string
}

// Args gives a constructor its part's parameters, typed, with defaults from the Part's
// description. A value of the wrong type is recorded as an error (placed on its line by the
// builder) and the getter returns the zero value.
type Args struct {
	Env  *Env
	part *Part
	vals map[string]any
	errs []error
}

// NewArgs returns Args over the given values for part (for tests and programs that build parts
// without a file).
func NewArgs(part *Part, env *Env, values map[string]any) *Args {
	if env == nil {
		env = &Env{}
	}
	return &Args{Env: env, part: part, vals: values}
}

// Has reports whether the parameter was given explicitly.
func (a *Args) Has(name string) bool {
	_, ok := a.vals[name]
	return ok
}

func (a *Args) value(name string) any {
	if v, ok := a.vals[name]; ok {
		return v
	}
	if p, ok := a.part.Param(name); ok {
		return p.Default
	}
	panic(fmt.Sprintf("pipeline: part %q reads undeclared parameter %q", a.part.Type, name))
}

func (a *Args) bad(name string, v any, want ParamType) {
	a.errs = append(a.errs, &core.ParamError{Param: name, Value: v, Reason: "must be " + article(want.String())})
}

func article(s string) string {
	if strings.HasPrefix(s, "list") || strings.HasPrefix(s, "table") {
		return "a " + s
	}
	if strings.IndexAny(s[:1], "aeiou") == 0 {
		return "an " + s
	}
	return "a " + s
}

// Float returns a float parameter (an integer is accepted; "inf" and "-inf" strings too).
func (a *Args) Float(name string) float64 {
	v := a.value(name)
	if f, ok := toFloat(v); ok {
		return f
	}
	a.bad(name, v, Float)
	return 0
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	case string:
		switch strings.ToLower(x) {
		case "inf", "+inf":
			return math.Inf(1), true
		case "-inf":
			return math.Inf(-1), true
		}
	}
	return 0, false
}

// Int returns an integer parameter.
func (a *Args) Int(name string) int {
	v := a.value(name)
	if i, ok := toInt(v); ok {
		return i
	}
	a.bad(name, v, Int)
	return 0
}

func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case int64:
		return int(x), true
	case int:
		return x, true
	}
	return 0, false
}

// Bool returns a boolean parameter.
func (a *Args) Bool(name string) bool {
	v := a.value(name)
	if b, ok := v.(bool); ok {
		return b
	}
	a.bad(name, v, Bool)
	return false
}

// String returns a string parameter.
func (a *Args) String(name string) string {
	v := a.value(name)
	if s, ok := v.(string); ok {
		return s
	}
	a.bad(name, v, String)
	return ""
}

// Ints returns a list-of-integers parameter.
func (a *Args) Ints(name string) []int {
	v := a.value(name)
	out, ok := toInts(v)
	if !ok {
		a.bad(name, v, IntList)
	}
	return out
}

func toInts(v any) ([]int, bool) {
	switch x := v.(type) {
	case []int:
		return x, true
	case []any:
		out := make([]int, 0, len(x))
		for _, e := range x {
			i, ok := toInt(e)
			if !ok {
				return nil, false
			}
			out = append(out, i)
		}
		return out, true
	case []int64:
		out := make([]int, len(x))
		for i, e := range x {
			out[i] = int(e)
		}
		return out, true
	}
	return nil, false
}

// Strings returns a list-of-strings parameter.
func (a *Args) Strings(name string) []string {
	v := a.value(name)
	switch x := v.(type) {
	case []string:
		return x
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				a.bad(name, v, StringList)
				return nil
			}
			out = append(out, s)
		}
		return out
	}
	a.bad(name, v, StringList)
	return nil
}

// IntLists returns a list-of-integer-lists parameter ([[1, 2], [3]]).
func (a *Args) IntLists(name string) [][]int {
	v := a.value(name)
	switch x := v.(type) {
	case [][]int:
		return x
	case []any:
		out := make([][]int, 0, len(x))
		for _, e := range x {
			l, ok := toInts(e)
			if !ok {
				a.bad(name, v, IntListList)
				return nil
			}
			out = append(out, l)
		}
		return out
	}
	a.bad(name, v, IntListList)
	return nil
}

// FloatMap returns a table of token id → float ({ "15" = 2.0, "7" = "-inf" }), ids sorted.
func (a *Args) FloatMap(name string) map[core.TokenID]float64 {
	v := a.value(name)
	var m map[string]any
	switch x := v.(type) {
	case map[string]any:
		m = x
	case map[core.TokenID]float64:
		return x
	default:
		a.bad(name, v, FloatMap)
		return nil
	}
	out := make(map[core.TokenID]float64, len(m))
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil {
			a.errs = append(a.errs, &core.ParamError{Param: name + "." + k, Reason: "key must be a token id (an integer)"})
			continue
		}
		f, ok := toFloat(m[k])
		if !ok {
			a.errs = append(a.errs, &core.ParamError{Param: name + "." + k, Value: m[k], Reason: `must be a number, "inf" or "-inf"`})
			continue
		}
		out[core.TokenID(id)] = f
	}
	return out
}

// Table returns a table parameter as decoded from TOML.
func (a *Args) Table(name string) map[string]any {
	v := a.value(name)
	if m, ok := v.(map[string]any); ok {
		return m
	}
	if v == nil {
		return nil
	}
	a.bad(name, v, AnyTable)
	return nil
}

// Values returns every explicitly given parameter (for parts that pass them on, like plugins).
func (a *Args) Values() map[string]any { return a.vals }

// Err returns the type errors recorded so far.
func (a *Args) Err() error {
	if len(a.errs) == 0 {
		return nil
	}
	return a.errs[0]
}
