package constraint_test

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/loomlm/loom/constraint"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/internal/apitools"
	"github.com/loomlm/loom/internal/llama3vocab"
	"github.com/loomlm/loom/toolcall"
)

// BenchmarkMaskLlama3ToolCalls times the masks of tool calls on Llama 3's 128k vocabulary:
// the 57 API schemas of testdata/api-schemas.json declared as the tools of one request, and a
// reply calling each of them with its valid instance, in the Hermes format, tokenized by
// Llama 3's tokenizer. "required" holds the whole reply to a call; "auto" lets it begin with
// a sentence and holds the call it then opens (constraint.Lazy). Every pass makes new
// processors from the one compiled grammar; the first pass builds the grammar's vocabulary
// slices (LOOM_MASK_WARM=1 runs a pass before the timing, as BenchmarkMaskLlama3 does).
func BenchmarkMaskLlama3ToolCalls(b *testing.B) {
	tok := llama3vocab.Tokenizer(b)
	constraint.TrieFor(tok)
	seq := newSeq(b, tok)
	raw, calls, err := apitools.Load("testdata/api-schemas.json")
	if err != nil {
		b.Fatal(err)
	}
	tools, err := toolcall.ParseTools(raw)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	cfg, err := toolcall.Hermes.Compile(tools, "", false)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("the grammar of %d tools compiled in %v", len(tools), time.Since(t0))
	// "required/mask" times the mask alone (Processor.Mask), as BenchmarkMaskLlama3 does and
	// llguidance's figures count; the others time Process, which also bans the tokens the
	// mask leaves out in the model's row of 128 256 logits.
	for _, mode := range []string{"required", "auto", "required/mask"} {
		b.Run(mode, func(b *testing.B) {
			var replies [][]core.TokenID
			for _, c := range calls {
				text := toolcall.Hermes.Write([]toolcall.Call{c})
				if mode == "auto" {
					text = "Let me look that up for you.\n" + text
				}
				ids, err := tok.Encode(text, core.EncodeOptions{})
				if err != nil {
					b.Fatal(err)
				}
				replies = append(replies, append(ids, tok.Special().EOS))
			}
			newProcessor := func() core.LogitsProcessor {
				p := constraint.New("tool_calls", cfg)
				if mode == "auto" {
					return constraint.NewLazy(p, toolcall.Hermes.Opener(), false)
				}
				return p
			}
			row := make([]float32, tok.VocabSize())
			var masks []time.Duration
			pass := func() {
				for i, reply := range replies {
					p := newProcessor()
					sp := p.(core.StatefulProcessor)
					for step, id := range reply {
						if mode == "required/mask" {
							t0 := time.Now()
							m := p.(*constraint.Processor).Mask(tok)
							masks = append(masks, time.Since(t0))
							if !m.Has(id) {
								b.Fatalf("%s: token %d %q of the call is masked", calls[i].Name, step, tok.TokenBytes(id))
							}
							sp.Accept(seq, id)
							continue
						}
						clear(row)
						c := core.NewCandidates(row)
						t0 := time.Now()
						if err := p.Process(seq, c); err != nil {
							b.Fatal(err)
						}
						masks = append(masks, time.Since(t0))
						if c.Dense()[id] != 0 {
							b.Fatalf("%s: token %d %q of the call is masked", calls[i].Name, step, tok.TokenBytes(id))
						}
						sp.Accept(seq, id)
					}
				}
			}
			if os.Getenv("LOOM_MASK_WARM") != "" {
				pass()
				masks = masks[:0]
				b.ResetTimer()
			}
			for b.Loop() {
				pass()
			}
			slices.Sort(masks)
			us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
			var sum time.Duration
			for _, d := range masks {
				sum += d
			}
			b.ReportMetric(us(sum)/float64(len(masks)), "mask-avg-µs")
			b.ReportMetric(us(masks[len(masks)/2]), "mask-p50-µs")
			b.ReportMetric(us(masks[len(masks)*99/100]), "mask-p99-µs")
			b.ReportMetric(us(masks[len(masks)-1]), "mask-max-µs")
			b.ReportMetric(float64(len(masks))/float64(b.N), "masks")
		})
	}
}
