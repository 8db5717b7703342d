package tokenizer

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/loomlm/loom/internal/fixtures"

	"github.com/loomlm/loom/core"
)

// benchText returns about n bytes of text shaped like prose: words drawn with Zipf-like
// frequencies from the English words of the GPT-2 vocabulary, with punctuation, numbers, line
// breaks and some non-Latin text.
func benchText(b *testing.B, n int) string {
	gpt2, err := Load(filepath.Join(fixtures.Path(b), "vocab", "ggml-vocab-gpt-2.gguf"))
	if err != nil {
		b.Fatal(err)
	}
	var words []string
	for _, p := range gpt2.tokens {
		w, ok := strings.CutPrefix(p, "Ġ")
		if ok && len(w) > 1 && strings.IndexFunc(w, func(r rune) bool { return !unicode.IsLower(r) }) < 0 {
			words = append(words, w)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	zipf := func() string {
		// Rank ∝ 1/u: frequent words come first in the vocabulary's merge order.
		return words[min(len(words)-1, max(0, int(1/(r.Float64()+1e-4))-1+r.IntN(3)))]
	}
	extras := []string{", ", ". ", "; ", " (", ") ", " 1984 ", " 3.14 ", "'s ", " — ", " Привет мир ", " 日本語 ", " 🦙 "}
	var sb strings.Builder
	for sb.Len() < n {
		w := zipf()
		if r.IntN(12) == 0 {
			w = strings.ToUpper(w[:1]) + w[1:]
		}
		sb.WriteString(w)
		switch k := r.IntN(100); {
		case k < 8:
			sb.WriteString(extras[r.IntN(len(extras))])
		case k < 10:
			sb.WriteString(".\n\n")
		default:
			sb.WriteString(" ")
		}
	}
	return sb.String()
}

func benchmarkEncode(b *testing.B, vocab string, cold bool) {
	tok, err := Load(filepath.Join(fixtures.Path(b), "vocab", vocab))
	if err != nil {
		b.Fatal(err)
	}
	text := benchText(b, 1<<20)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	tokens := 0
	for b.Loop() {
		if cold {
			b.StopTimer()
			tok.resetCaches()
			b.StartTimer()
		}
		ids, err := tok.Encode(text, core.EncodeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		tokens += len(ids)
	}
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkEncodeSPM tokenises 1 MB of text with the Llama 2 vocabulary, with the chunk cache
// warm (cached) and emptied before each run (cold).
func BenchmarkEncodeSPM(b *testing.B) {
	b.Run("cached", func(b *testing.B) { benchmarkEncode(b, "ggml-vocab-llama-spm.gguf", false) })
	b.Run("cold", func(b *testing.B) { benchmarkEncode(b, "ggml-vocab-llama-spm.gguf", true) })
}

// BenchmarkEncodeBPE tokenises 1 MB of text with the GPT-2 vocabulary, with the word cache
// warm (cached) and emptied before each run (cold).
func BenchmarkEncodeBPE(b *testing.B) {
	b.Run("cached", func(b *testing.B) { benchmarkEncode(b, "ggml-vocab-gpt-2.gguf", false) })
	b.Run("cold", func(b *testing.B) { benchmarkEncode(b, "ggml-vocab-gpt-2.gguf", true) })
}

// BenchmarkDecode decodes the tokens of 1 MB of text.
func BenchmarkDecode(b *testing.B) {
	tok, err := Load(filepath.Join(fixtures.Path(b), "vocab", "ggml-vocab-gpt-2.gguf"))
	if err != nil {
		b.Fatal(err)
	}
	ids, err := tok.Encode(benchText(b, 1<<20), core.EncodeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		_ = tok.Decode(ids)
	}
	b.ReportMetric(float64(len(ids))*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}
