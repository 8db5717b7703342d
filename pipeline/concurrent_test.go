package pipeline_test

import (
	"context"
	"sync"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
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
	spec, err := pipeline.Parse("c.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	b, err := pipeline.Build(spec, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
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
