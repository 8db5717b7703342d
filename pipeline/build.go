package pipeline

import (
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/loomlm/loom/core"
)

// Options control Build.
type Options struct {
	// Registry is the set of part types; nil means Builtins().
	Registry *Registry
	// StartPlugins starts the pipeline's declared plugins and registers their parts in reg.
	// It is required when the file declares [[plugins]].
	StartPlugins func(spec *Spec, reg *Registry) (io.Closer, error)
	// Overrides change the file's settings (command-line flags).
	Overrides Overrides
}

// Overrides are settings that take precedence over the pipeline file. Nil fields change
// nothing.
type Overrides struct {
	// ModelPath replaces [model] with this GGUF file (relative to the working directory).
	ModelPath string
	// Temperature, TopK and TopP set the parameter of the pipeline's processor of that type,
	// or add one (temperature first, top-k and top-p last). A temperature above zero turns a
	// greedy strategy into sampling.
	Temperature *float64
	TopK        *int
	TopP        *float64
	// MaxNewTokens, Seed and N replace the [generation] defaults.
	MaxNewTokens *int
	Seed         *uint64
	N            *int
}

// Built is a ready pipeline with the request defaults of its file. Close releases the model
// and stops plugins.
type Built struct {
	Pipeline   *core.Pipeline
	Generation Generation
	Spec       *Spec
	closers    []io.Closer
}

// Close releases what Build opened, in reverse order.
func (b *Built) Close() error {
	var errs []error
	for i := len(b.closers) - 1; i >= 0; i-- {
		if err := b.closers[i].Close(); err != nil {
			errs = append(errs, err)
		}
	}
	b.closers = nil
	return errors.Join(errs...)
}

// Request returns a request for prompt with the pipeline's generation defaults.
func (b *Built) Request(prompt string) core.Request {
	g := b.Generation
	return core.Request{
		Prompt:       prompt,
		MaxNewTokens: g.MaxNewTokens,
		Seed:         g.Seed,
		N:            g.N,
		IgnoreEOS:    g.IgnoreEOS,
		Return:       core.ReturnOptions{Logprobs: g.Logprobs, TopLogprobs: g.TopLogprobs, Trace: g.Trace},
	}
}

// LoadAndBuild loads a pipeline file and builds it.
func LoadAndBuild(path string, opts Options) (*Built, error) {
	spec, err := Load(path)
	if err != nil {
		return nil, err
	}
	return Build(spec, opts)
}

// Build applies the overrides, opens the model, starts plugins and builds every part. It
// reports every problem it finds, each with file, line and field path.
func Build(spec *Spec, opts Options) (*Built, error) {
	reg := opts.Registry
	if reg == nil {
		reg = Builtins()
	}
	reg = reg.Clone()
	applyOverrides(spec, opts.Overrides)
	el := &errList{file: spec.File, loc: spec.loc}
	b := &Built{Spec: spec, Generation: spec.Generation}
	fail := func(err error) (*Built, error) {
		_ = b.Close()
		return nil, err
	}

	if len(spec.Plugins) > 0 {
		if opts.StartPlugins == nil {
			el.add("plugins", "this program cannot run plugins")
			return fail(el.err())
		}
		closer, err := opts.StartPlugins(spec, reg)
		if closer != nil {
			b.closers = append(b.closers, closer)
		}
		if err != nil {
			var es Errors
			if errors.As(err, &es) {
				return fail(es)
			}
			el.add("plugins", "%v", err)
			return fail(el.err())
		}
	}

	env := &Env{Dir: spec.Dir}
	model, tok, closer, err := OpenModel(spec.Model, spec.Dir)
	if closer != nil {
		b.closers = append(b.closers, closer)
	}
	if err != nil {
		el.add(spec.Model.path, "%v", err)
		return fail(el.err())
	}
	env.Model, env.Tokenizer = model, tok
	if spec.DraftModel != nil {
		dm, dt, closer, err := OpenModel(*spec.DraftModel, spec.Dir)
		if closer != nil {
			b.closers = append(b.closers, closer)
		}
		if err != nil {
			el.add(spec.DraftModel.path, "%v", err)
			return fail(el.err())
		}
		env.DraftModel, env.DraftTokenizer = dm, dt
	}

	p := &core.Pipeline{Model: model, Tokenizer: tok}
	if v := buildPart(el, reg, Strategy, spec.Strategy, env); v != nil {
		p.Strategy = v.(core.Strategy)
	}
	var procTypes []string
	for _, ps := range spec.Processors {
		if v := buildPart(el, reg, Processor, ps, env); v != nil {
			p.Processors = append(p.Processors, v.(core.LogitsProcessor))
			procTypes = append(procTypes, ps.Type)
		}
	}
	p.Processors = orderProcessors(spec.Order, p.Processors, procTypes)
	for _, ps := range spec.Stopping {
		if v := buildPart(el, reg, Stopping, ps, env); v != nil {
			p.Stopping = append(p.Stopping, v.(core.StoppingCriterion))
		}
	}
	if err := el.err(); err != nil {
		return fail(err)
	}
	if err := p.Validate(); err != nil {
		el.add("", "%v", err)
		return fail(el.err())
	}
	b.Pipeline = p
	return b, nil
}

// buildPart checks a part's parameters against its description and calls its constructor.
func buildPart(el *errList, reg *Registry, kind Kind, ps PartSpec, env *Env) any {
	if ps.Type == "" {
		return nil // already reported by the parser
	}
	part, ok := reg.Lookup(kind, ps.Type)
	if !ok {
		el.add(ps.Path+".type", " = %q: unknown %s type (known: %s)", ps.Type, kind, reg.typeNames(kind))
		return nil
	}
	bad := false
	for _, k := range sortedKeys(ps.Params) {
		if _, ok := part.Param(k); !ok {
			el.add(ps.Path+"."+k, "unknown parameter of %s (known: %s)", ps.Type, part.paramNames())
			bad = true
		}
	}
	for _, prm := range part.Params {
		if _, given := ps.Params[prm.Name]; !given && prm.Default == nil {
			el.add(ps.Path+"."+prm.Name, "missing: %s requires it (%s)", ps.Type, prm.Doc)
			bad = true
		}
	}
	if bad {
		return nil
	}
	a := &Args{Env: env, part: part, vals: ps.Params}
	var v any
	var err error
	switch kind {
	case Processor:
		v, err = part.NewProcessor(a)
	case Stopping:
		v, err = part.NewStopping(a)
	case Strategy:
		v, err = part.NewStrategy(a)
	}
	errs := a.errs
	if err != nil && len(errs) == 0 {
		errs = append(errs, err)
	}
	for _, e := range errs {
		var pe *core.ParamError
		if errors.As(e, &pe) {
			el.add(ps.Path+"."+pe.Param, "%s", strings.TrimPrefix(pe.Error(), pe.Param))
		} else {
			el.add(ps.Path, "%s: %v", ps.Type, e)
		}
	}
	if len(errs) > 0 {
		return nil
	}
	return v
}

func applyOverrides(spec *Spec, o Overrides) {
	if o.ModelPath != "" {
		abs, err := filepath.Abs(o.ModelPath)
		if err != nil {
			abs = o.ModelPath
		}
		spec.Model = ModelSpec{Path: abs, Options: spec.Model.Options, path: "flag --model"}
	}
	// set overrides the parameter of the first processor of type typ, or adds a processor
	// whose errors name the flag.
	set := func(typ, param string, v any, first bool, flag string) {
		for _, ps := range spec.Processors {
			if ps.Type == typ {
				ps.Params[param] = v
				return
			}
		}
		ps := PartSpec{Type: typ, Params: map[string]any{param: v}, Path: "flag " + flag}
		if first {
			spec.Processors = slices.Insert(spec.Processors, 0, ps)
		} else {
			spec.Processors = append(spec.Processors, ps)
		}
	}
	if o.Temperature != nil {
		set("temperature", "t", *o.Temperature, true, "--temperature")
		if *o.Temperature > 0 && spec.Strategy.Type == "greedy" {
			spec.Strategy.Type = "sample"
		}
	}
	if o.TopK != nil {
		set("top_k", "k", int64(*o.TopK), false, "--top-k")
	}
	if o.TopP != nil {
		set("top_p", "p", *o.TopP, false, "--top-p")
	}
	if o.MaxNewTokens != nil {
		spec.Generation.MaxNewTokens = *o.MaxNewTokens
	}
	if o.Seed != nil {
		spec.Generation.Seed = o.Seed
	}
	if o.N != nil {
		spec.Generation.N = *o.N
	}
}

// Orders are the processor order presets a pipeline's top-level order key accepts:
//
//   - "file" (the default): the processors run as written.
//   - "hf": Hugging Face transformers' (and vLLM's) order — logit shaping (penalties, biases,
//     bans, DRY), then temperature, then truncation, then mirostat.
//   - "llama.cpp": llama.cpp's default sampler order — logit shaping, then truncation, then
//     temperature, then mirostat.
//
// A preset sorts the processors stably by class (see ProcessorClass), so processors of one
// class keep their file order.
var Orders = []string{"file", "hf", "llama.cpp"}

func orderNames() string {
	quoted := make([]string, len(Orders))
	for i, o := range Orders {
		quoted[i] = `"` + o + `"`
	}
	return strings.Join(quoted, ", ")
}

// orderProcessors reorders procs (of the given types) for an order preset.
func orderProcessors(order string, procs []core.LogitsProcessor, types []string) []core.LogitsProcessor {
	var rank [4]int
	switch order {
	case "hf":
		rank = [4]int{ClassShaping: 0, ClassTemperature: 1, ClassTruncation: 2, ClassFinal: 3}
	case "llama.cpp":
		rank = [4]int{ClassShaping: 0, ClassTruncation: 1, ClassTemperature: 2, ClassFinal: 3}
	default:
		return procs
	}
	idx := make([]int, len(procs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return rank[ProcessorClass(types[a])] - rank[ProcessorClass(types[b])]
	})
	out := make([]core.LogitsProcessor, len(procs))
	for i, j := range idx {
		out[i] = procs[j]
	}
	return out
}
