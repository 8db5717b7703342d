package pipeline_test

import (
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/testmodel"
)

// The "checked" model is the test model behind an opener that, like the GGUF loader, checks
// its options and reports each bad one as a *core.ParamError naming the key.
func init() {
	pipeline.RegisterBuiltinModel("checked", func(options map[string]any) (core.Model, core.Tokenizer, io.Closer, error) {
		var errs []error
		for _, k := range slices.Sorted(maps.Keys(options)) {
			if k != "threads" {
				errs = append(errs, &core.ParamError{Param: k, Reason: "unknown model option (known: threads)"})
			} else if n, ok := options[k].(int64); !ok || n < 1 {
				errs = append(errs, &core.ParamError{Param: k, Value: options[k], Reason: "must be a positive integer"})
			}
		}
		if len(errs) > 0 {
			return nil, nil, nil, errors.Join(errs...)
		}
		m, t := testmodel.Default()
		return m, t, nil, nil
	})
}

// buildErrors parses and builds src and returns every error line.
func buildErrors(t *testing.T, src string, opts pipeline.Options) []string {
	t.Helper()
	spec, err := pipeline.Parse("bad.toml", []byte(src))
	if spec == nil {
		return []string{err.Error()}
	}
	b, err := pipeline.Build(spec, opts)
	if err == nil {
		b.Close()
		t.Fatal("no error")
	}
	var es pipeline.Errors
	if !errors.As(err, &es) {
		t.Fatalf("error %T %v is not pipeline.Errors", err, err)
	}
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return lines
}

// One pass reports the errors of every section: generation, model options (on their own
// lines), strategy, processors and stopping criteria.
func TestEveryErrorAtOnce(t *testing.T) {
	src := `[generation]
n = 0
seed = -4

[model]
builtin = "checked"
kv_type = "q3"

[strategy]
type = "beem"

[[processors]]
type = "top_p"
p = 1.5

[[processors]]
type = "min_p"
q = 1

[[stopping]]
type = "max_time"
seconds = 0
`
	got := buildErrors(t, src, pipeline.Options{})
	want := []string{
		"bad.toml:2: generation.n = 0: must be in [1, 1024]",
		"bad.toml:3: generation.seed = -4: must be an integer in [0, 18446744073709551615]",
		"bad.toml:7: model.kv_type: unknown model option (known: threads)",
		`bad.toml:10: strategy.type = "beem": unknown strategy type`,
		"bad.toml:14: processors[0].p = 1.5: must be in [0, 1] (1 disables, 0 keeps the most likely token)",
		"bad.toml:18: processors[1].q: unknown parameter of min_p",
		"bad.toml:22: stopping[0].seconds = 0: must be positive",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d errors:\n%s\nwant %d", len(got), strings.Join(got, "\n"), len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("error %d:\n got  %s\n want %s…", i, got[i], want[i])
		}
	}
}

// A model's bad options are each placed on their own line.
func TestModelOptionErrorsOnTheirLines(t *testing.T) {
	got := buildErrors(t, "[model]\nbuiltin = \"checked\"\n\nthreads = 0\n# a comment\nkv_type = \"f16\"\n", pipeline.Options{})
	want := []string{"bad.toml:4: model.threads = 0: must be a positive integer", "bad.toml:6: model.kv_type: unknown model option (known: threads)"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// When the model cannot be opened, the parts are still checked for their parameters.
func TestPartsCheckedWhenModelFails(t *testing.T) {
	got := buildErrors(t, "[model]\nbuiltin = \"nope\"\n\n[[stopping]]\ntype = \"stop_tokens\"\nids = [1]\n\n[[stopping]]\ntype = \"max_time\"\nseconds = -1\n", pipeline.Options{})
	want := []string{`bad.toml:1: model: builtin = "nope": no such embedded model`, "bad.toml:10: stopping[1].seconds = -1: must be positive"}
	if len(got) != len(want) {
		t.Fatalf("got %d errors:\n%s\nwant %d", len(got), strings.Join(got, "\n"), len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("error %d:\n got  %s\n want %s…", i, got[i], want[i])
		}
	}
}

// A [model] table the parser rejected is reported once, not again when opening it.
func TestBadModelTableReportedOnce(t *testing.T) {
	got := buildErrors(t, "[model]\nbuiltin = 3\n\n[generation]\nn = 0\n", pipeline.Options{})
	want := []string{"bad.toml:1: model: set exactly one of path", "bad.toml:2: model.builtin: must be a non-empty string", "bad.toml:5: generation.n = 0"}
	if len(got) != len(want) {
		t.Fatalf("got %d errors:\n%s\nwant %d", len(got), strings.Join(got, "\n"), len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("error %d:\n got  %s\n want %s…", i, got[i], want[i])
		}
	}
}

// Overrides are held to the file's limits and their errors name the flag.
func TestOverrideErrorsNameTheFlag(t *testing.T) {
	n, topP, kv := 0, 2.0, 0
	src := "[model]\nbuiltin = \"test\"\n[[processors]]\ntype = \"top_p\"\np = 0.9\n"
	got := buildErrors(t, src, pipeline.Options{Overrides: pipeline.Overrides{N: &n, TopP: &topP, KVBudgetMiB: &kv}})
	want := []string{"--kv-budget 0: must be in [1, 1048576] (MiB)", "--n 0: must be in [1, 1024]", "--top-p 2: must be in [0, 1] (1 disables, 0 keeps the most likely token)"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Options.Model stands in for [model]; without either, the file is missing its model.
func TestOptionsModel(t *testing.T) {
	m, tok := testmodel.Default()
	spec, err := pipeline.Parse("m.toml", []byte("[strategy]\ntype = \"greedy\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := pipeline.Build(spec, pipeline.Options{Model: m, Tokenizer: tok})
	if err != nil {
		t.Fatal(err)
	}
	if b.Pipeline.Model != core.Model(m) {
		t.Error("the built pipeline does not use the given model")
	}
	b.Close()
	if got := buildErrors(t, "[strategy]\ntype = \"greedy\"\n", pipeline.Options{}); len(got) != 1 || !strings.HasPrefix(got[0], "bad.toml: no [model] table") {
		t.Errorf("without a model: %v", got)
	}
	if _, err := pipeline.Build(spec, pipeline.Options{Model: m}); err == nil {
		t.Error("a model without its tokenizer was accepted")
	}
}

// forwardCounter is a model that counts its Forward calls.
type forwardCounter struct {
	core.Model
	calls int
}

func (f *forwardCounter) Forward(ctx context.Context, batch []core.ForwardItem) error {
	f.calls++
	return f.Model.Forward(ctx, batch)
}

// Options.DraftModel stands in for [draft_model]: a speculative pipeline drafts with it, the
// table (if any) is not opened, and a strategy that drafts with no model refuses it.
func TestOptionsDraftModel(t *testing.T) {
	m, tok := testmodel.Default()
	draft := &forwardCounter{Model: m}
	opts := pipeline.Options{Model: m, Tokenizer: tok, DraftModel: draft, DraftTokenizer: tok}
	for _, src := range []string{
		"[strategy]\ntype = \"speculative\"\nk = 2\n",
		"[draft_model]\npath = \"no-such-file.gguf\"\n[strategy]\ntype = \"speculative\"\nk = 2\n",
	} {
		spec, err := pipeline.Parse("d.toml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		b, err := pipeline.Build(spec, opts)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		draft.calls = 0
		if _, err := core.Generate(context.Background(), b.Pipeline, core.Request{Prompt: "the cat", MaxNewTokens: 8, IgnoreEOS: true}); err != nil {
			t.Fatal(err)
		}
		b.Close()
		if draft.calls == 0 {
			t.Errorf("%q: the given draft model was never called", src)
		}
	}
	got := buildErrors(t, "[strategy]\ntype = \"greedy\"\n", opts)
	want := "bad.toml:2: strategy.type: the greedy strategy uses no draft model (speculative does), and the program gave one (Options.DraftModel)"
	if len(got) != 1 || got[0] != want {
		t.Errorf("greedy with a draft model: %q, want %q", got, want)
	}
	spec, err := pipeline.Parse("d.toml", []byte("[strategy]\ntype = \"speculative\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pipeline.Build(spec, pipeline.Options{Model: m, Tokenizer: tok, DraftModel: draft}); err == nil {
		t.Error("a draft model without its tokenizer was accepted")
	}
	// A model given both ways is an error, not one of them ignored.
	for _, o := range []pipeline.Options{
		{Model: m, Tokenizer: tok, Overrides: pipeline.Overrides{ModelPath: "other.gguf"}},
		{Model: m, Tokenizer: tok, DraftModel: draft, DraftTokenizer: tok, Overrides: pipeline.Overrides{DraftModelPath: "other.gguf"}},
	} {
		if _, err := pipeline.Build(spec, o); err == nil || !strings.Contains(err.Error(), "both give the") {
			t.Errorf("Options with a model and its override path: %v, want an error saying both give it", err)
		}
	}
}

// Seeds: integers up to 2^63-1, larger ones as plain integers or strings, nothing else.
func TestSeedValues(t *testing.T) {
	for _, tc := range []struct {
		lit  string
		want uint64
		err  string
	}{
		{"0", 0, ""},
		{"9223372036854775807", 1<<63 - 1, ""},
		{"9223372036854775808", 1 << 63, ""},
		{"18446744073709551615", 1<<64 - 1, ""},
		{`"18446744073709551615"`, 1<<64 - 1, ""},
		{`"42"`, 42, ""},
		{"18446744073709551616", 0, "invalid TOML"},
		{`"-1"`, 0, "must be an integer in [0, 18446744073709551615]"},
		{"1.5", 0, "must be an integer in [0, 18446744073709551615]"},
	} {
		spec, err := pipeline.Parse("s.toml", []byte("[model]\nbuiltin = \"test\"\n[generation]\nseed = "+tc.lit+"\n"))
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("seed = %s: error %v, want %q", tc.lit, err, tc.err)
			}
		case err != nil:
			t.Errorf("seed = %s: %v", tc.lit, err)
		case spec.Generation.Seed == nil || *spec.Generation.Seed != tc.want:
			t.Errorf("seed = %s: got %v, want %d", tc.lit, spec.Generation.Seed, tc.want)
		}
	}
}

// MaxPromptBytes is the context length times the longest token: a text that long can still
// fit (it is the bound, not an estimate), and one byte more cannot.
func TestMaxPromptBytes(t *testing.T) {
	m, tok := testmodel.Default()
	p := &core.Pipeline{Model: m, Tokenizer: tok}
	limit := pipeline.MaxPromptBytes(p)
	longest := 0
	for id := range tok.VocabSize() {
		longest = max(longest, len(tok.TokenBytes(core.TokenID(id))), len(tok.Piece(core.TokenID(id))))
	}
	if ctx := m.Config().ContextLength; limit != ctx*longest {
		t.Fatalf("MaxPromptBytes = %d, want %d × %d", limit, ctx, longest)
	}
	if err := pipeline.CheckPromptSize(p, "--prompt", int64(limit)); err != nil {
		t.Errorf("at the bound: %v", err)
	}
	err := pipeline.CheckPromptSize(p, "--prompt", int64(limit+1))
	if err == nil || !strings.HasPrefix(err.Error(), "--prompt: ") {
		t.Errorf("past the bound: %v", err)
	}
	// Soundness: encoding texts of every length up to a few hundred bytes never yields fewer
	// than ⌈bytes / longest⌉ tokens.
	text := strings.Repeat("the cat sat under the home and bad blue ", 20)
	for n := 1; n <= len(text); n++ {
		ids, err := tok.Encode(text[:n], core.EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(ids)*longest < n {
			t.Fatalf("%d bytes encoded to %d tokens of at most %d bytes", n, len(ids), longest)
		}
	}
}

// --no-mmap sets mmap = false on the model and the draft model, whose loaders' errors about
// it name the flag.
func TestNoMmapOverride(t *testing.T) {
	src := "[model]\nbuiltin = \"checked\"\n[draft_model]\nbuiltin = \"checked\"\n[strategy]\ntype = \"speculative\"\n"
	got := buildErrors(t, src, pipeline.Options{Overrides: pipeline.Overrides{NoMmap: true}})
	want := []string{"--no-mmap: unknown model option (known: threads)", "--no-mmap (draft model): unknown model option (known: threads)"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
