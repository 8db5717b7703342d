package plugins_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/plugins"
	"github.com/loomlm/loom/strategies"
	"github.com/loomlm/loom/testmodel"
)

// BenchmarkProcessorOverhead measures one processor step (all rows of a batch) through a plugin
// against the same processor in process. "scale" reads and rewrites the whole row (the worst
// case: the row crosses twice and is checked for NaN); "ban" declares that it reads only the
// history and answers with a ban list. Transports: "shm" (shared memory and the doorbell, the
// default), "shm-stream" (shared memory, each step a message on the gRPC stream), "grpc"
// (everything inside the messages). The overhead per token is (plugin − inproc) / batch.
//
//	go test ./plugins -run '^$' -bench ProcessorOverhead -benchtime 2000x
func BenchmarkProcessorOverhead(b *testing.B) {
	for _, vocab := range []int{32000, 151936} {
		m, tok := testmodel.New(testmodel.Config{VocabSize: vocab})
		for _, batch := range []int{1, 8} {
			seqs := startSession(b, m, tok, batch)
			for _, part := range []string{"scale", "ban"} {
				inproc := core.LogitsProcessor(scaleProc{t: 0.7})
				if part == "ban" {
					inproc = banProc{ids: []core.TokenID{5, 9, 11}}
				}
				name := fmt.Sprintf("%s/vocab=%d/batch=%d", part, vocab, batch)
				b.Run(name+"/inproc", func(b *testing.B) { runSteps(b, inproc, seqs) })
				for _, tr := range []struct {
					name string
					t    plugins.Transport
				}{{"shm", plugins.SharedMemory}, {"shm-stream", plugins.SharedMemoryStream}, {"grpc", plugins.GRPC}} {
					b.Run(name+"/"+tr.name, func(b *testing.B) {
						p, closeHost := pluginProcessor(b, tr.t, "tp."+part, m, tok)
						defer closeHost()
						runSteps(b, p, seqs)
					})
				}
			}
		}
	}
}

// startSession returns n sequences holding the logits after a short prompt.
func startSession(b *testing.B, m core.Model, tok core.Tokenizer, n int) []*core.Sequence {
	s, err := core.NewSession(b.Context(), &core.Pipeline{Model: m, Tokenizer: tok, Strategy: strategies.Greedy{}}, core.Request{Prompt: "the cat sat on the mat", MaxNewTokens: 16, N: n})
	if err != nil {
		b.Fatal(err)
	}
	seqs, err := s.Start(n)
	if err != nil {
		b.Fatal(err)
	}
	return seqs
}

// runSteps processes the sequences' rows, restored before each step.
func runSteps(b *testing.B, p core.LogitsProcessor, seqs []*core.Sequence) {
	rows := make([][]float32, len(seqs))
	cands := make([]*core.Candidates, len(seqs))
	for i, q := range seqs {
		rows[i] = make([]float32, len(q.Logits()))
		cands[i] = core.NewCandidates(rows[i])
	}
	bp, batched := p.(core.BatchProcessor)
	b.ResetTimer()
	for b.Loop() {
		for i, q := range seqs {
			copy(rows[i], q.Logits())
			cands[i].Reset(rows[i])
		}
		var err error
		if batched && len(seqs) > 1 {
			err = bp.ProcessBatch(seqs, cands)
		} else {
			for i, q := range seqs {
				if err = p.Process(q, cands[i]); err != nil {
					break
				}
			}
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(seqs)), "ns/token")
}

// pluginProcessor starts the test plugin and builds one of its processors for model m.
func pluginProcessor(b *testing.B, tr plugins.Transport, typ string, m core.Model, tok core.Tokenizer) (core.LogitsProcessor, func()) {
	dir := b.TempDir()
	src := fmt.Sprintf("[model]\nbuiltin = \"test\"\n[[plugins]]\nname = \"tp\"\npath = %q\nsha256 = %q\n[plugins.config]\nt = 0.7\nban = [5, 9, 11]\n",
		binary("testplugin"), sum(b, binary("testplugin")))
	path := filepath.Join(dir, "p.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		b.Fatal(err)
	}
	spec, err := pipeline.Load(path)
	if err != nil {
		b.Fatal(err)
	}
	reg := pipeline.Builtins().Clone()
	h, err := plugins.Start(spec, reg, plugins.Options{Transport: tr})
	if err != nil {
		if h != nil {
			h.Close()
		}
		b.Fatal(err)
	}
	part, ok := reg.Lookup(pipeline.Processor, typ)
	if !ok {
		h.Close()
		b.Fatalf("no processor %s", typ)
	}
	p, err := part.NewProcessor(pipeline.NewArgs(part, &pipeline.Env{Model: m, Tokenizer: tok}, nil))
	if err != nil {
		h.Close()
		b.Fatal(err)
	}
	return p, func() { h.Close() }
}
