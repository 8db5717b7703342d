package pipeline_test

import (
	"context"
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
)

// The same processors written in a mixed order, for the order presets.
const mixedOrder = `
[model]
builtin = "test"

[generation]
max_new_tokens = 1
seed = 3
trace = 3

[[processors]]
type = "top_k"
k = 30

[[processors]]
type = "temperature"
t = 2.0

[[processors]]
type = "penalties"
repeat = 1.2

[[processors]]
type = "mirostat"
tau = 8.0

[[processors]]
type = "top_p"
p = 0.5

[[processors]]
type = "dry"

[[processors]]
type = "dynamic_temperature"
delta = 0.0
t = 1.0
`

func buildWithOrder(t *testing.T, order string) *pipeline.Built {
	t.Helper()
	src := mixedOrder
	if order != "" {
		src = "order = \"" + order + "\"\n" + src
	}
	spec, err := pipeline.Parse("order.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	b, err := pipeline.Build(spec, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func names(procs []core.LogitsProcessor) string {
	var out []string
	for _, p := range procs {
		out = append(out, p.Name())
	}
	return strings.Join(out, " ")
}

func TestOrderPresets(t *testing.T) {
	for _, tc := range []struct{ order, want string }{
		{"", "top_k temperature penalties mirostat top_p dry dynamic_temperature"},
		{"file", "top_k temperature penalties mirostat top_p dry dynamic_temperature"},
		// Shaping, then temperature, then truncation, then mirostat; each class in file order.
		{"hf", "penalties dry temperature dynamic_temperature top_k top_p mirostat"},
		// Shaping, then truncation, then temperature, then mirostat.
		{"llama.cpp", "penalties dry top_k top_p temperature dynamic_temperature mirostat"},
	} {
		b := buildWithOrder(t, tc.order)
		if got := names(b.Pipeline.Processors); got != tc.want {
			t.Errorf("order %q: %s\nwant %s", tc.order, got, tc.want)
		}
		if tc.order == "" && b.Spec.Order != "file" {
			t.Errorf("default order %q, want file", b.Spec.Order)
		}
		b.Close()
	}
}

// The preset changes what the truncation keeps: temperature 2 before top-p 0.5 (hf) flattens
// the distribution, so the nucleus holds more tokens than with top-p first (llama.cpp).
func TestOrderPresetChangesTheNucleus(t *testing.T) {
	keptAfterTopP := func(order string) int {
		b := buildWithOrder(t, order)
		defer b.Close()
		res, err := core.Generate(context.Background(), b.Pipeline, b.Request("the cat sat"))
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range res.Sequences[0].Trace[0].Stages {
			if st.Processor == "top_p" {
				return st.Kept
			}
		}
		t.Fatal("no top_p stage in the trace")
		return 0
	}
	hf, llama := keptAfterTopP("hf"), keptAfterTopP("llama.cpp")
	if hf <= llama {
		t.Fatalf("top-p kept %d tokens after temperature 2 (hf) and %d before it (llama.cpp)", hf, llama)
	}
}

func TestOrderErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"order = \"vllm\"\n[model]\nbuiltin = \"test\"\n",
			`bad.toml:1: order = "vllm": unknown order (known: "file", "hf", "llama.cpp")`},
		{"name = \"x\"\norder = 3\n[model]\nbuiltin = \"test\"\n",
			`bad.toml:2: order = 3: must be a string: "file", "hf", "llama.cpp"`},
	} {
		_, err := pipeline.Parse("bad.toml", []byte(tc.src))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q:\n got %v\nwant %s", tc.src, err, tc.want)
		}
	}
}

func TestProcessorClasses(t *testing.T) {
	for typ, want := range map[string]pipeline.Class{
		"temperature": pipeline.ClassTemperature, "dynamic_temperature": pipeline.ClassTemperature,
		"top_k": pipeline.ClassTruncation, "xtc": pipeline.ClassTruncation, "top_n_sigma": pipeline.ClassTruncation,
		"eta_cutoff": pipeline.ClassTruncation, "mirostat": pipeline.ClassFinal,
		"dry": pipeline.ClassShaping, "logit_bias": pipeline.ClassShaping, "a_plugin_type": pipeline.ClassShaping,
	} {
		if got := pipeline.ProcessorClass(typ); got != want {
			t.Errorf("%s: class %d, want %d", typ, got, want)
		}
	}
	// Every built-in processor type is classified on purpose: shaping ones are listed here.
	shaping := map[string]bool{"logit_bias": true, "bad_words": true, "no_repeat_ngram": true, "min_new_tokens": true,
		"penalties": true, "repetition_penalty": true, "frequency_penalty": true, "presence_penalty": true, "dry": true,
		"grammar": true, "choice": true, "regex": true, "json_schema": true, "tool_calls": true}
	for _, p := range pipeline.Builtins().Parts(pipeline.Processor) {
		if pipeline.ProcessorClass(p.Type) == pipeline.ClassShaping && !shaping[p.Type] {
			t.Errorf("processor %s has no class: add it to the order presets", p.Type)
		}
	}
}

// The example pipeline with DRY and XTC builds in llama.cpp's order and generates the same
// samples from the same seed.
func TestDRYXTCExample(t *testing.T) {
	run := func() *core.Result {
		b, err := pipeline.LoadAndBuild("../pipelines/dry-xtc.toml", pipeline.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if got := names(b.Pipeline.Processors); got != "dry min_p xtc temperature" {
			t.Fatalf("processors %s, want dry min_p xtc temperature", got)
		}
		res, err := core.Generate(context.Background(), b.Pipeline, b.Request("the cat sat on the mat and the dog sat on the mat"))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b := run(), run()
	if len(a.Sequences) != 2 {
		t.Fatalf("%d sequences, want 2", len(a.Sequences))
	}
	for i := range a.Sequences {
		if a.Sequences[i].Text != b.Sequences[i].Text || len(a.Sequences[i].Tokens) == 0 {
			t.Fatalf("sample %d: %q then %q", i, a.Sequences[i].Text, b.Sequences[i].Text)
		}
	}
}
