package tokenizer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/internal/fixtures"
)

// TestSPMChunksAreExact checks that tokenising SentencePiece text chunk by chunk gives what
// the merge algorithm gives on the whole text at once.
func TestSPMChunksAreExact(t *testing.T) {
	llama, err := Load(fixtures.Path(t, "vocab", "ggml-vocab-llama-spm.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	toks := []*Tokenizer{mustNew(t, spmVocab(true, testPieces, nil)), llama}
	alphabet := []string{"a", "b", "c", "h", "i", "the", "ing", " ", " ", "  ", "\n", "\t", "é", "中文", "🦙", "\xff", "\xe4\xb8", "1", "23", ".", "'", "▁"}
	r := rand.New(rand.NewPCG(5, 8))
	for _, tok := range toks {
		for range 500 {
			var sb strings.Builder
			for range r.IntN(40) {
				sb.WriteString(alphabet[r.IntN(len(alphabet))])
			}
			text := sb.String()
			if text == "" {
				continue
			}
			got, err := tok.Encode(text, core.EncodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			escaped := strings.ReplaceAll(" "+text, " ", spmSpace)
			want, err := tok.spmChunk(&spmScratch{}, nil, escaped)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%q: chunked %v, whole %v", text, got, want)
			}
		}
	}
}

// TestConcurrentEncode encodes from several goroutines at once (run with -race), sharing the
// caches.
func TestConcurrentEncode(t *testing.T) {
	spm := mustNew(t, spmVocab(true, testPieces, testSpecials))
	bpe := mustNew(t, bpeVocab("llama-bpe", []string{"Ġ t", "h e", "Ġt he"}, nil))
	texts := []string{"the hi", " the cat", "abc abc", "héllo wörld", "a\nb\n\nc"}
	want := map[*Tokenizer][][]core.TokenID{}
	for _, tok := range []*Tokenizer{spm, bpe} {
		for _, s := range texts {
			ids, _ := tok.Encode(s, core.EncodeOptions{})
			want[tok] = append(want[tok], ids)
		}
		tok.resetCaches()
	}
	done := make(chan error)
	for g := range 8 {
		go func() {
			var err error
			for i := range 200 {
				tok := []*Tokenizer{spm, bpe}[(g+i)%2]
				k := (g * i) % len(texts)
				ids, _ := tok.Encode(texts[k], core.EncodeOptions{})
				if !slices.Equal(ids, want[tok][k]) && err == nil {
					err = fmt.Errorf("%q: %v, want %v", texts[k], ids, want[tok][k])
				}
				if i%50 == 0 {
					tok.resetCaches()
				}
			}
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
