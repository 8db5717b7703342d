// Package pipeline turns a TOML pipeline file into a validated, built core.Pipeline. A
// Registry maps part type names ("top_p", "stop_strings", "beam") to constructors, so built-in
// parts and plugins are declared the same way; every error names the file, the line and the
// field path.
package pipeline

import (
	"fmt"
	"sort"
	"strings"

	"github.com/loomlm/loom/core"
)

// Kind is the kind of a pipeline part.
type Kind int

// The kinds of parts a pipeline declares.
const (
	Processor Kind = iota
	Stopping
	Strategy
)

func (k Kind) String() string {
	switch k {
	case Processor:
		return "processor"
	case Stopping:
		return "stopping"
	case Strategy:
		return "strategy"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// section is the pipeline table that declares parts of the kind.
func (k Kind) section() string {
	switch k {
	case Processor:
		return "processors"
	case Stopping:
		return "stopping"
	}
	return "strategy"
}

// ParamType is the TOML type a parameter takes.
type ParamType int

// Parameter types.
const (
	Float ParamType = iota
	Int
	Bool
	String
	IntList        // [1, 2, 3]
	StringList     // ["a", "b"]
	IntListList    // [[1, 2], [3]]
	FloatMap       // { "123" = -1.5, "7" = "-inf" }: token id → value
	AnyTable       // a table passed through as is (plugin config)
	StringOrIntSet // a list mixing strings and ints
)

func (t ParamType) String() string {
	return [...]string{"float", "int", "bool", "string", "list of ints", "list of strings",
		"list of int lists", "table of token id → float", "table", "list of strings or ints"}[t]
}

// Param describes one parameter of a part. A nil Default makes the parameter required.
type Param struct {
	Name    string
	Type    ParamType
	Default any
	Doc     string
}

// Part describes a part type and how to build it. Exactly one of the constructors matching
// Kind is set.
type Part struct {
	Kind   Kind
	Type   string
	Doc    string
	Params []Param
	// Source names where the part comes from: "built-in", or PluginSource of the plugin's
	// name for a part a plugin serves.
	Source string

	NewProcessor func(a *Args) (core.LogitsProcessor, error)
	NewStopping  func(a *Args) (core.StoppingCriterion, error)
	NewStrategy  func(a *Args) (core.Strategy, error)
	// UsesDraftModel marks a strategy that drafts with the pipeline's [draft_model]; a
	// pipeline that declares a draft model for any other strategy is refused, rather than
	// loading a model it would never run.
	UsesDraftModel bool
}

// Param returns the parameter description with the given name.
func (p *Part) Param(name string) (Param, bool) {
	for _, q := range p.Params {
		if q.Name == name {
			return q, true
		}
	}
	return Param{}, false
}

func (p *Part) paramNames() string {
	names := make([]string, len(p.Params))
	for i, q := range p.Params {
		names[i] = q.Name
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// Registry maps (kind, type name) to part descriptions. The zero value is empty and usable.
type Registry struct {
	parts map[Kind]map[string]*Part
}

// Register adds a part. It fails when the type is already registered for the kind or the
// part lacks its constructor.
func (r *Registry) Register(p *Part) error {
	ok := (p.Kind == Processor && p.NewProcessor != nil) ||
		(p.Kind == Stopping && p.NewStopping != nil) ||
		(p.Kind == Strategy && p.NewStrategy != nil)
	if !ok || p.Type == "" {
		return fmt.Errorf("registering %s %q: missing type name or constructor", p.Kind, p.Type)
	}
	if r.parts == nil {
		r.parts = map[Kind]map[string]*Part{}
	}
	if r.parts[p.Kind] == nil {
		r.parts[p.Kind] = map[string]*Part{}
	}
	if old, dup := r.parts[p.Kind][p.Type]; dup {
		return fmt.Errorf("%s type %q is already registered (by %s)", p.Kind, p.Type, old.Source)
	}
	if p.Source == "" {
		p.Source = "built-in"
	}
	r.parts[p.Kind][p.Type] = p
	return nil
}

// PluginSource is the Source of the parts served by the plugin declared under name.
func PluginSource(name string) string { return "plugin " + name }

// MustRegister is Register that panics, for built-ins registered at init.
func (r *Registry) MustRegister(p *Part) {
	if err := r.Register(p); err != nil {
		panic(err)
	}
}

// Lookup returns the part of the kind with the type name.
func (r *Registry) Lookup(k Kind, typ string) (*Part, bool) {
	p, ok := r.parts[k][typ]
	return p, ok
}

// Parts returns the parts of a kind sorted by type name.
func (r *Registry) Parts(k Kind) []*Part {
	var out []*Part
	for _, p := range r.parts[k] {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// Clone returns a copy that can be extended (with a pipeline's plugins) without changing r.
func (r *Registry) Clone() *Registry {
	c := &Registry{parts: map[Kind]map[string]*Part{}}
	for k, m := range r.parts {
		c.parts[k] = map[string]*Part{}
		for n, p := range m {
			c.parts[k][n] = p
		}
	}
	return c
}

// typeNames lists the registered type names of a kind, for "unknown type" errors.
func (r *Registry) typeNames(k Kind) string {
	var names []string
	for _, p := range r.Parts(k) {
		names = append(names, p.Type)
	}
	return strings.Join(names, ", ")
}
