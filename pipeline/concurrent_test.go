package pipeline_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"

	"github.com/loomlm/loom/core"
)

// TestBuiltPipelineServesConcurrentRequests runs one built pipeline (a JSON Schema
// constraint and other stateful processors, two samples a request) for six requests at once,
// as core.Pipeline's contract allows: each answers what it answers alone, and under -race
// nothing is written that another session reads (every session clones the processors, and
// cloning the constraint's parser wrote to the template).
func TestBuiltPipelineServesConcurrentRequests(t *testing.T) {
	src := `[model]
builtin = "default"
[generation]
max_new_tokens = 16
n = 2
[strategy]
type = "sample"
[[processors]]
type = "json_schema"
schema = '{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["a"]}'
[[processors]]
type = "dry"
multiplier = 0.8
[[processors]]
type = "penalties"
presence = 0.5
frequency = 0.2
[[processors]]
type = "xtc"
probability = 0.5
threshold = 0.1
[[processors]]
type = "temperature"
t = 0.9
`
	b, err := buildFile(t, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]string, 6)
	for i := range want {
		req := b.Request("the cat")
		req.Seed = core.SeedOf(uint64(i))
		res, err := core.Generate(context.Background(), b.Pipeline, req)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = res.Sequences[0].Text + "|" + res.Sequences[1].Text
	}
	var wg sync.WaitGroup
	for i := range want {
		wg.Go(func() {
			req := b.Request("the cat")
			req.Seed = core.SeedOf(uint64(i))
			res, err := core.Generate(context.Background(), b.Pipeline, req)
			if err != nil {
				t.Error(err)
				return
			}
			if got := res.Sequences[0].Text + "|" + res.Sequences[1].Text; got != want[i] {
				t.Errorf("seed %d: concurrent %q, alone %q", i, got, want[i])
			}
		})
	}
	wg.Wait()
}

// TestExamplePipelinesServeConcurrentRequests runs every example pipeline, each built once,
// for four requests at once: each answers what it answers alone (speculation's cost policy
// chooses its k by the clock, and the examples that use it decode greedily), and the
// strategies' and processors' state stays per session under -race.
func TestExamplePipelinesServeConcurrentRequests(t *testing.T) {
	files, err := filepath.Glob("../pipelines/*.toml")
	if err != nil || len(files) == 0 {
		t.Fatalf("example pipelines: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src := regexp.MustCompile(`(?m)^max_new_tokens = .*$`).ReplaceAllString(string(b), "max_new_tokens = 24")
		built, err := buildFile(t, src, nil)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		run := func(i int) string {
			req := built.Request("And God said unto the people")
			req.Seed = core.SeedOf(uint64(i))
			res, err := core.Generate(context.Background(), built.Pipeline, req)
			if err != nil {
				t.Error(f, err)
				return ""
			}
			var out string
			for _, s := range res.Sequences {
				out += s.Text + "|"
			}
			return out
		}
		alone := make([]string, 4)
		for i := range alone {
			alone[i] = run(i)
		}
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				if got := run(i); got != alone[i] {
					t.Errorf("%s seed %d: concurrent %q, alone %q", f, i, got, alone[i])
				}
			})
		}
		wg.Wait()
	}
}
