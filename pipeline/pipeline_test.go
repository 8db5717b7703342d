package pipeline_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"

	// The example pipelines run on the embedded models; the GGUF loader opens them.
	_ "github.com/loomlm/loom/model/loader"
	_ "github.com/loomlm/loom/models"
)

const valid = `# a pipeline on the test model
name = "valid"

[model]
builtin = "test"

[generation]
max_new_tokens = 12
seed = 5
n = 2

[strategy]
type = "sample"

[[stopping]]
type = "stop_strings"
strings = ["garden"]

[[stopping]]
type = "max_new_tokens"
n = 8
`

func TestBuildAndGenerate(t *testing.T) {
	spec, err := pipeline.Parse("valid.toml", []byte(valid))
	if err != nil {
		t.Fatal(err)
	}
	b, err := pipeline.Build(spec, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Generation.MaxNewTokens != 12 || *b.Generation.Seed != 5 || b.Generation.N != 2 {
		t.Fatalf("generation = %+v", b.Generation)
	}
	if got := len(b.Pipeline.Stopping); got != 2 {
		t.Fatalf("%d stopping criteria, want 2", got)
	}
	res, err := core.Generate(context.Background(), b.Pipeline, b.Request("the cat"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Sequences) != 2 || res.Seed != 5 {
		t.Fatalf("%d sequences, seed %d", len(res.Sequences), res.Seed)
	}
	for _, s := range res.Sequences {
		if len(s.Tokens) > 8 {
			t.Errorf("sequence %d has %d tokens, max_new_tokens criterion says 8", s.Index, len(s.Tokens))
		}
	}
}

func TestErrorsNameFileLineAndField(t *testing.T) {
	cases := []struct {
		name string
		src  string
		want []string
	}{
		{"unknown top-level key", "[model]\nbuiltin = \"test\"\n\n[modle]\nx = 1\n",
			[]string{"bad.toml:4: modle: unknown table or key"}},
		{"missing model", "[strategy]\ntype = \"greedy\"\n",
			[]string{"bad.toml: no [model] table"}},
		{"both path and builtin", "[model]\nbuiltin = \"test\"\npath = \"x.gguf\"\n",
			[]string{"bad.toml:1: model: set exactly one of path"}},
		{"unknown builtin model", "[model]\nbuiltin = \"nope\"\n",
			[]string{`bad.toml:1: model: builtin = "nope": no such embedded model`}},
		{"unknown strategy", "[model]\nbuiltin = \"test\"\n[strategy]\ntype = \"beem\"\n",
			[]string{`bad.toml:4: strategy.type = "beem": unknown strategy type (known: `}},
		{"unknown stopping param", "[model]\nbuiltin = \"test\"\n[[stopping]]\ntype = \"max_time\"\nseconds = 1\nminutes = 2\n",
			[]string{"bad.toml:6: stopping[0].minutes: unknown parameter of max_time (known: seconds)"}},
		{"missing param", "[model]\nbuiltin = \"test\"\n[[stopping]]\ntype = \"max_time\"\n",
			[]string{"bad.toml:3: stopping[0].seconds: missing: max_time requires it"}},
		{"wrong type", "[model]\nbuiltin = \"test\"\n[[stopping]]\ntype = \"max_new_tokens\"\nn = \"ten\"\n",
			[]string{`bad.toml:5: stopping[0].n = "ten": must be an int`}},
		{"out of range", "[model]\nbuiltin = \"test\"\n[[stopping]]\ntype = \"stop_strings\"\nstrings = [\"\"]\n[[stopping]]\ntype = \"max_time\"\nseconds = -1\n",
			[]string{`bad.toml:5: stopping[0].strings = "": stop strings must not be empty`, "bad.toml:8: stopping[1].seconds = -1: must be positive"}},
		{"generation range", "[model]\nbuiltin = \"test\"\n[generation]\nn = 0\nmax_new_tokens = -3\n",
			[]string{"bad.toml:4: generation.n = 0: must be in [1, 1024]", "bad.toml:5: generation.max_new_tokens = -3: must be in [0, 16777216]"}},
		{"n above what beam search returns", "[model]\nbuiltin = \"test\"\n[generation]\nn = 5\n[strategy]\ntype = \"beam\"\nnum_beams = 4\n",
			[]string{"bad.toml:4: generation.n = 5: beam search returns at most num_beams = 4 sequences"}},
		{"TOML syntax", "[model]\nbuiltin = \"test\"\nx = = 3\n",
			[]string{"bad.toml:3: invalid TOML"}},
		{"processors not an array", "[model]\nbuiltin = \"test\"\n[processors]\ntype = \"top_k\"\n",
			[]string{"bad.toml:3: processors: must be an array of tables"}},
		{"plugin without checksum", "[model]\nbuiltin = \"test\"\n[[plugins]]\nname = \"p\"\npath = \"./p\"\n",
			[]string{"bad.toml:3: plugins[0]: missing sha256"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec, err := pipeline.Parse("bad.toml", []byte(c.src))
			if err == nil {
				var b *pipeline.Built
				b, err = pipeline.Build(spec, pipeline.Options{})
				if err == nil {
					b.Close()
					t.Fatal("no error")
				}
			}
			var es pipeline.Errors
			if !errors.As(err, &es) {
				t.Fatalf("error %T %v is not pipeline.Errors", err, err)
			}
			if len(es) != len(c.want) {
				t.Fatalf("got %d errors:\n%v\nwant %d", len(es), err, len(c.want))
			}
			for i, w := range c.want {
				if !strings.HasPrefix(es[i].Error(), w) {
					t.Errorf("error %d:\n got  %s\n want %s…", i, es[i].Error(), w)
				}
			}
		})
	}
}

func TestOverrides(t *testing.T) {
	spec, err := pipeline.Parse("g.toml", []byte("[model]\nbuiltin = \"test\"\n[strategy]\ntype = \"greedy\"\n[generation]\nmax_new_tokens = 4\n"))
	if err != nil {
		t.Fatal(err)
	}
	max := 9
	seed := uint64(77)
	b, err := pipeline.Build(spec, pipeline.Options{Overrides: pipeline.Overrides{MaxNewTokens: &max, Seed: &seed}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Generation.MaxNewTokens != 9 || *b.Generation.Seed != 77 {
		t.Fatalf("generation = %+v", b.Generation)
	}
}

func TestOverrideModelPathWithoutLoaderIsAClearError(t *testing.T) {
	spec, err := pipeline.Parse("g.toml", []byte("[model]\nbuiltin = \"test\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = pipeline.Build(spec, pipeline.Options{Overrides: pipeline.Overrides{ModelPath: "/nonexistent/model.gguf"}})
	if err == nil || !strings.Contains(err.Error(), "model.gguf") {
		t.Fatalf("err = %v, want one naming the model file", err)
	}
}

func TestExamplePipelinesValidate(t *testing.T) {
	files, _ := filepath.Glob("../pipelines/*.toml")
	if len(files) == 0 {
		t.Fatal("no example pipelines in ../pipelines")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if _, err := os.Stat(f); err != nil {
				t.Fatal(err)
			}
			b, err := pipeline.LoadAndBuild(f, pipeline.Options{})
			if err != nil {
				t.Fatal(err)
			}
			b.Close()
		})
	}
}

func TestSearchStrategies(t *testing.T) {
	cases := []struct {
		name, src, wantErr string
	}{
		{"beam", "[model]\nbuiltin = \"test\"\n[strategy]\ntype = \"beam\"\nnum_beams = 3\nnum_return_sequences = 2\n", ""},
		{"beam return > beams", "[model]\nbuiltin = \"test\"\n[strategy]\ntype = \"beam\"\nnum_beams = 2\nnum_return_sequences = 3\n",
			"x.toml:6: strategy.num_return_sequences = 3: must be in [1, num_beams = 2]"},
		{"speculative", "[model]\nbuiltin = \"test\"\n[draft_model]\nbuiltin = \"test\"\n[strategy]\ntype = \"speculative\"\nk = 3\n", ""},
		{"speculative without draft", "[model]\nbuiltin = \"test\"\n[strategy]\ntype = \"speculative\"\n",
			"x.toml:3: strategy: speculative: needs a [draft_model]"},
		{"draft model for a strategy that drafts nothing", "[model]\nbuiltin = \"test\"\n[draft_model]\nbuiltin = \"test\"\n[strategy]\ntype = \"prompt_lookup\"\n",
			"x.toml:3: draft_model: the prompt_lookup strategy uses no draft model (speculative does): remove the draft model"},
		{"prompt lookup", "[model]\nbuiltin = \"test\"\n[strategy]\ntype = \"prompt_lookup\"\nngram = 2\n", ""},
		{"prompt lookup k", "[model]\nbuiltin = \"test\"\n[strategy]\ntype = \"prompt_lookup\"\nk = 0\n",
			"x.toml:5: strategy.k = 0: must be in [1, 64]"},
		{"prompt lookup cost policy", "[model]\nbuiltin = \"test\"\n[strategy]\ntype = \"prompt_lookup\"\nk_policy = \"cost\"\n", ""},
		{"adaptive spelled both ways", "[model]\nbuiltin = \"test\"\n[strategy]\ntype = \"prompt_lookup\"\nadaptive = true\nk_policy = \"acceptance\"\n", ""},
		{"unknown k policy", "[model]\nbuiltin = \"test\"\n[strategy]\ntype = \"prompt_lookup\"\nk_policy = \"fast\"\n",
			"x.toml:5: strategy.k_policy = \"fast\": must be fixed, acceptance or cost"},
		{"adaptive contradicts k policy", "[model]\nbuiltin = \"test\"\n[strategy]\ntype = \"prompt_lookup\"\nadaptive = true\nk_policy = \"cost\"\n",
			"x.toml:5: strategy.adaptive = true: contradicts k_policy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec, err := pipeline.Parse("x.toml", []byte(c.src))
			if err != nil {
				t.Fatal(err)
			}
			b, err := pipeline.Build(spec, pipeline.Options{})
			if c.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				if _, err := core.Generate(context.Background(), b.Pipeline, core.Request{Prompt: "the cat", MaxNewTokens: 5, Seed: core.SeedOf(1)}); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), c.wantErr) {
				t.Fatalf("err = %v\nwant %s…", err, c.wantErr)
			}
		})
	}
}
