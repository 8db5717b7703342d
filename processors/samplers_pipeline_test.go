package processors_test

import (
	"context"
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/processors"
)

// The new samplers build from pipeline files under their TOML names, with their defaults, and
// generate.
func TestNewSamplersBuildFromTOML(t *testing.T) {
	all := `
[[processors]]
type = "dry"

[[processors]]
type = "dry"
multiplier = 1.2
base = 2
allowed_length = 3
penalty_last_n = 256
sequence_breakers = ["\n", "sat"]

[[processors]]
type = "top_n_sigma"

[[processors]]
type = "epsilon_cutoff"

[[processors]]
type = "eta_cutoff"
min_keep = 2

[[processors]]
type = "top_p"
p = 0.9
boundary = "exclusive"

[[processors]]
type = "xtc"
threshold = 0.2

[[processors]]
type = "dynamic_temperature"

[[processors]]
type = "mirostat"
version = 1
tau = 6.0

[[processors]]
type = "mirostat"
`
	b, err := buildTOML(t, all)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var names []string
	for _, p := range b.Pipeline.Processors {
		names = append(names, p.Name())
	}
	want := "dry dry top_n_sigma epsilon_cutoff eta_cutoff top_p xtc dynamic_temperature mirostat mirostat"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("processors %s\nwant %s", got, want)
	}
	if got := b.Pipeline.Processors[1].(*processors.DRY).String(); got != `dry(multiplier 1.2, base 2, allowed_length 3, penalty_last_n 256, sequence_breakers ["\n" "sat"])` {
		t.Errorf("dry built as %s", got)
	}
	req := b.Request("the cat sat on the mat")
	req.N = 3
	res, err := core.Generate(context.Background(), b.Pipeline, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Sequences) != 3 {
		t.Fatalf("%d sequences", len(res.Sequences))
	}
	for _, p := range pipeline.Builtins().Parts(pipeline.Processor) {
		for _, prm := range p.Params {
			if prm.Doc == "" {
				t.Errorf("%s.%s has no doc", p.Type, prm.Name)
			}
		}
	}
}

func TestNewSamplerErrorsNameLineAndField(t *testing.T) {
	cases := []struct{ procs, want string }{
		{"[[processors]]\ntype = \"dry\"\nbase = 0.5\n", "p.toml:10: processors[0].base = 0.5: must be a finite number ≥ 1"},
		{"[[processors]]\ntype = \"dry\"\npenalty_last_n = -3\n", "p.toml:10: processors[0].penalty_last_n = -3: must be ≥ -1 (-1: the whole sequence, 0 disables)"},
		{"[[processors]]\ntype = \"dry\"\nsequence_breakers = [\"\\n\", \"\"]\n", `p.toml:10: processors[0].sequence_breakers[1] = "": must be 1 to 64 bytes`},
		{"[[processors]]\ntype = \"dry\"\nsequence_breakers = \"\\n\"\n", `p.toml:10: processors[0].sequence_breakers = "\n": must be a list of strings`},
		{"[[processors]]\ntype = \"xtc\"\nthreshold = 2.0\n", "p.toml:10: processors[0].threshold = 2: must be in (0, 1] (above 0.5 disables)"},
		{"[[processors]]\ntype = \"mirostat\"\nversion = 3\n", "p.toml:10: processors[0].version = 3: must be 1 or 2"},
		{"[[processors]]\ntype = \"mirostat\"\nversion = 1\nm = 1\n", "p.toml:11: processors[0].m = 1: must be ≥ 2"},
		{"[[processors]]\ntype = \"top_n_sigma\"\nn = -1.0\n", "p.toml:10: processors[0].n = -1: must be in [0, 3.4028235e+38] (float32 range; 0 disables)"},
		{"[[processors]]\ntype = \"epsilon_cutoff\"\nepsilon = 1.0\n", "p.toml:10: processors[0].epsilon = 1: must be in (0, 1)"},
		{"[[processors]]\ntype = \"eta_cutoff\"\nmin_keep = 0\n", "p.toml:10: processors[0].min_keep = 0: must be ≥ 1"},
		{"[[processors]]\ntype = \"dynamic_temperature\"\ndelta = -1.0\n", "p.toml:10: processors[0].delta = -1: must be in [0, 3.4028235e+38] (float32 range; 0: plain temperature)"},
		{"[[processors]]\ntype = \"top_p\"\nboundary = \"strict\"\n", `p.toml:10: processors[0].boundary = "strict": must be "inclusive" or "exclusive"`},
	}
	for _, c := range cases {
		_, err := buildTOML(t, c.procs)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant %s…", c.procs, err, c.want)
		}
	}
}
