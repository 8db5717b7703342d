package pipeline

import (
	"errors"
	"fmt"
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
	// Model and Tokenizer, when set, are the pipeline's model: a model the program has already
	// loaded (or implemented itself). The file's [model] table, if any, is then not opened and
	// may be left out; the caller keeps ownership (Built.Close does not close the model).
	Model     core.Model
	Tokenizer core.Tokenizer
	// DraftModel and DraftTokenizer, when set, are the draft model of a strategy that uses
	// one (speculative): the file's [draft_model] table, if any, is then not opened and may be
	// left out; the caller keeps ownership. A strategy that uses no draft model is an error
	// with them, as with the table.
	DraftModel     core.Model
	DraftTokenizer core.Tokenizer
}

// Overrides are settings that take precedence over the pipeline file. Nil fields change
// nothing.
type Overrides struct {
	// ModelPath replaces [model] with this GGUF file (relative to the working directory).
	ModelPath string
	// DraftModelPath replaces [draft_model] (or adds one) with this GGUF file, keeping the
	// table's options.
	DraftModelPath string
	// Temperature, TopK and TopP set the parameter of the pipeline's processor of that type,
	// or add one (temperature first, top-k and top-p last). A temperature above zero turns a
	// greedy strategy into sampling.
	Temperature *float64
	TopK        *int
	TopP        *float64
	// MaxNewTokens, Seed, N, TopLogprobs and Trace replace the [generation] defaults; they
	// are held to the same ranges as the file's values.
	MaxNewTokens *int
	Seed         *uint64
	N            *int
	TopLogprobs  *int
	Trace        *int
	// KVBudgetMiB sets the [model] option kv_budget_mb: the most memory the KV cache may
	// take, in MiB.
	KVBudgetMiB *int
	// KVType sets the [model] option kv_type: the KV cache's element type (f32, f16, q8_0).
	KVType *string
	// NoMmap sets the option mmap = false of [model] and [draft_model]: their files are read
	// into memory instead of mapped.
	NoMmap bool
	// JSONSchemaFile, Regex and GrammarFile add a json_schema, regex or grammar processor
	// first in the chain (before any processor that truncates the candidates); a relative
	// file is read from the working directory.
	JSONSchemaFile, Regex, GrammarFile *string
	// Think sets the think parameter of the constraints those add (a reasoning model's
	// thinking block before the constrained text: none, start or open).
	Think *string
}

// overrideFlags names the command-line flag of each override, for errors.
var overrideFlags = map[string]string{
	"max_new_tokens": "--max-new-tokens", "n": "--n", "top_logprobs": "--top-logprobs", "trace": "--trace",
}

// MaxKVBudgetMiB is the largest KV cache budget an override may ask for (1 TiB).
const MaxKVBudgetMiB = 1 << 20

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

// LoadAndBuild loads a pipeline file and builds it. A file with errors is still built as far
// as it can be, so that the error lists every problem of the file at once.
func LoadAndBuild(path string, opts Options) (*Built, error) {
	spec, err := Load(path)
	if spec == nil {
		return nil, err
	}
	return Build(spec, opts)
}

// Build applies the overrides, opens the model, starts plugins and builds every part. It
// reports every problem it finds, each with file, line and field path (or the flag of an
// override), together with the problems Parse found in spec: a spec that Parse returned with
// an error may be given, and its build fails with all of them.
func Build(spec *Spec, opts Options) (*Built, error) {
	reg := opts.Registry
	if reg == nil {
		reg = Builtins()
	}
	reg = reg.Clone()
	el := &errList{file: spec.File, loc: spec.loc, flags: map[string]string{}}
	el.errs = append(el.errs, spec.errs...)
	if !spec.hasModel && opts.Model == nil {
		el.add("", "no [model] table: declare path = \"FILE.gguf\" or builtin = \"NAME\"")
	}
	if (opts.Model == nil) != (opts.Tokenizer == nil) {
		return nil, errors.New("pipeline: Options.Model and Options.Tokenizer must be set together")
	}
	if (opts.DraftModel == nil) != (opts.DraftTokenizer == nil) {
		return nil, errors.New("pipeline: Options.DraftModel and Options.DraftTokenizer must be set together")
	}
	if opts.Model != nil && opts.Overrides.ModelPath != "" {
		return nil, errors.New("pipeline: Options.Model and Overrides.ModelPath both give the model: set one")
	}
	if opts.DraftModel != nil && opts.Overrides.DraftModelPath != "" {
		return nil, errors.New("pipeline: Options.DraftModel and Overrides.DraftModelPath both give the draft model: set one")
	}
	applyOverrides(spec, opts.Overrides, el)
	b := &Built{Spec: spec, Generation: spec.Generation}
	fail := func() (*Built, error) {
		_ = b.Close()
		el.sort()
		return nil, el.err()
	}

	if len(spec.Plugins) > 0 {
		if opts.StartPlugins == nil {
			el.add("plugins", "this program cannot run plugins")
			return fail()
		}
		closer, err := opts.StartPlugins(spec, reg)
		if closer != nil {
			b.closers = append(b.closers, closer)
		}
		if err != nil {
			var es Errors
			if errors.As(err, &es) {
				el.errs = append(el.errs, es...)
			} else {
				el.add("plugins", "%v", err)
			}
			return fail()
		}
	}

	// A model that fails to open is reported, and the parts are still built (without it) so
	// that every error of the file comes at once.
	env := &Env{Dir: spec.Dir}
	switch {
	case opts.Model != nil:
		env.Model, env.Tokenizer = opts.Model, opts.Tokenizer
	case spec.hasModel:
		env.Model, env.Tokenizer = b.openModel(el, spec.Model, spec.Dir)
	}
	env.modelFailed = env.Model == nil
	if spec.DraftModel != nil || opts.DraftModel != nil {
		part, ok := reg.Lookup(Strategy, spec.Strategy.Type)
		switch {
		case ok && !part.UsesDraftModel && spec.DraftModel != nil:
			el.add("draft_model", "the %s strategy uses no draft model (speculative does): remove the draft model", spec.Strategy.Type)
		case ok && !part.UsesDraftModel:
			el.add("strategy.type", "the %s strategy uses no draft model (speculative does), and the program gave one (Options.DraftModel)", spec.Strategy.Type)
		case opts.DraftModel != nil:
			env.DraftModel, env.DraftTokenizer = opts.DraftModel, opts.DraftTokenizer
		default:
			env.DraftModel, env.DraftTokenizer = b.openModel(el, *spec.DraftModel, spec.Dir)
			env.modelFailed = env.modelFailed || env.DraftModel == nil
		}
	}

	p := &core.Pipeline{Model: env.Model, Tokenizer: env.Tokenizer}
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
	// A strategy that returns a bounded number of sequences (beam search: num_beams) refuses
	// a larger n here, at its line or flag, rather than at every request.
	if rc, ok := p.Strategy.(interface{ Returns(n int) (int, error) }); ok && spec.Generation.N > 1 {
		if _, err := rc.Returns(spec.Generation.N); err != nil {
			reason := err.Error()
			var pe *core.ParamError
			if errors.As(err, &pe) {
				reason = pe.Reason
			}
			el.add("generation.n", " = %d: %s", spec.Generation.N, reason)
		}
	}
	for _, ps := range spec.Stopping {
		if v := buildPart(el, reg, Stopping, ps, env); v != nil {
			p.Stopping = append(p.Stopping, v.(core.StoppingCriterion))
		}
	}
	if el.err() != nil {
		return fail()
	}
	if err := p.Validate(); err != nil {
		el.add("", "%v", err)
		return fail()
	}
	b.Pipeline = p
	return b, nil
}

// openModel opens a [model] or [draft_model] table, recording its errors: an error in one of
// the table's options is placed on that option's line (or names the flag that set it).
func (b *Built) openModel(el *errList, ms ModelSpec, dir string) (core.Model, core.Tokenizer) {
	if (ms.Path == "") == (ms.Builtin == "") {
		return nil, nil // the parser has reported the table
	}
	model, tok, closer, err := OpenModel(ms, dir)
	if err == nil {
		if closer != nil {
			b.closers = append(b.closers, closer)
		}
		return model, tok
	}
	if closer != nil {
		_ = closer.Close()
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		var pe *core.ParamError
		if errors.As(e, &pe) {
			el.add(ms.path+"."+pe.Param, "%s", strings.TrimPrefix(pe.Error(), pe.Param))
		} else {
			el.add(ms.path, "%v", e)
		}
	}
	return nil, nil
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
		var ve *valueError
		switch {
		case errors.As(e, &ve):
			el.addIn(ps.Path+"."+ve.param, ve.line, ve.col, ve.msg)
		case errors.As(e, &pe):
			el.add(ps.Path+"."+pe.Param, "%s", strings.TrimPrefix(pe.Error(), pe.Param))
		case env.modelFailed:
			// Without its model a part may fail for that reason alone: only its parameter
			// errors are reported until the model opens.
		default:
			el.add(ps.Path, "%s: %v", ps.Type, e)
		}
	}
	if len(errs) > 0 {
		return nil
	}
	return v
}

// applyOverrides applies the overrides to spec, checking them against the limits the file's
// values have; errors (recorded in el) name the flag.
func applyOverrides(spec *Spec, o Overrides, el *errList) {
	if o.ModelPath != "" {
		abs, err := filepath.Abs(o.ModelPath)
		if err != nil {
			abs = o.ModelPath
		}
		if spec.Model.Options == nil {
			spec.Model.Options = map[string]any{}
		}
		spec.Model = ModelSpec{Path: abs, Options: spec.Model.Options, path: "model"}
		spec.hasModel = true
		el.flags["model"] = "--model"
	}
	if o.DraftModelPath != "" {
		abs, err := filepath.Abs(o.DraftModelPath)
		if err != nil {
			abs = o.DraftModelPath
		}
		var opts map[string]any
		if spec.DraftModel != nil {
			opts = spec.DraftModel.Options
		}
		spec.DraftModel = &ModelSpec{Path: abs, Options: opts, path: "draft_model"}
		el.flags["draft_model"] = "--draft-model"
	}
	// modelOption sets a [model] option from a flag, which the option's errors then name.
	modelOption := func(key string, v any, flag string) {
		spec.Model.SetOption(key, v)
		el.flags["model."+key] = flag
	}
	if o.KVBudgetMiB != nil {
		if v := *o.KVBudgetMiB; v < 1 || v > MaxKVBudgetMiB {
			el.addFlag("--kv-budget", v, fmt.Sprintf("must be in [1, %d] (MiB)", MaxKVBudgetMiB))
		} else {
			modelOption("kv_budget_mb", int64(v), "--kv-budget")
		}
	}
	if o.KVType != nil { // checked by the model loader
		modelOption("kv_type", *o.KVType, "--kv-type")
	}
	if o.NoMmap {
		spec.SetModelsOption("mmap", false)
		el.flags["model.mmap"], el.flags["draft_model.mmap"] = "--no-mmap", "--no-mmap (draft model)"
	}
	// set overrides the parameter of the first processor of type typ, or adds a processor;
	// either way the parameter's errors name the flag.
	set := func(typ, param string, v any, first bool, flag string) {
		for _, ps := range spec.Processors {
			if ps.Type == typ {
				ps.Params[param] = v
				el.flags[ps.Path+"."+param] = flag
				return
			}
		}
		ps := PartSpec{Type: typ, Params: map[string]any{param: v}, Path: "flag " + flag}
		el.flags[ps.Path] = flag
		el.flags[ps.Path+"."+param] = flag
		if first {
			spec.Processors = slices.Insert(spec.Processors, 0, ps)
		} else {
			spec.Processors = append(spec.Processors, ps)
		}
	}
	// Constraints go first, in the order grammar, regex, JSON Schema.
	for _, c := range []struct {
		v                *string
		typ, param, flag string
	}{
		{o.JSONSchemaFile, "json_schema", "schema_file", "--json-schema"},
		{o.Regex, "regex", "pattern", "--regex"},
		{o.GrammarFile, "grammar", "grammar_file", "--grammar"},
	} {
		if c.v == nil {
			continue
		}
		v := *c.v
		if c.param != "pattern" && !filepath.IsAbs(v) {
			if abs, err := filepath.Abs(v); err == nil {
				v = abs
			}
		}
		ps := PartSpec{Type: c.typ, Params: map[string]any{c.param: v}, Path: "flag " + c.flag}
		el.flags[ps.Path] = c.flag
		el.flags[ps.Path+"."+c.param] = c.flag
		if o.Think != nil {
			ps.Params["think"] = *o.Think
			el.flags[ps.Path+".think"] = "--think"
		}
		spec.Processors = slices.Insert(spec.Processors, 0, ps)
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
	for _, g := range []struct {
		key string
		v   *int
		dst *int
	}{
		{"max_new_tokens", o.MaxNewTokens, &spec.Generation.MaxNewTokens},
		{"n", o.N, &spec.Generation.N},
		{"top_logprobs", o.TopLogprobs, &spec.Generation.TopLogprobs},
		{"trace", o.Trace, &spec.Generation.Trace},
	} {
		if g.v == nil {
			continue
		}
		if reason := generationLimits[g.key].check(*g.v); reason != "" {
			el.addFlag(overrideFlags[g.key], *g.v, reason)
			continue
		}
		*g.dst = *g.v
		el.flags["generation."+g.key] = overrideFlags[g.key]
	}
	if o.Seed != nil {
		spec.Generation.Seed = o.Seed
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
