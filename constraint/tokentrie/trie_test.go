package tokentrie_test

import (
	"bytes"
	"testing"

	"github.com/loomlm/loom/constraint/tokentrie"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/llama"
	"github.com/loomlm/loom/models"
)

// prefixRecognizer accepts exactly the prefixes of a set of byte strings (at most one byte
// past the state is needed), a recogniser independent of the Earley parser.
type prefixRecognizer struct {
	words [][]byte
	buf   []byte
}

func (r *prefixRecognizer) ok(next []byte) bool {
	for _, w := range r.words {
		if bytes.HasPrefix(w, next) {
			return true
		}
	}
	return false
}

func (r *prefixRecognizer) CanAdvance(b byte) bool {
	return r.ok(append(r.buf[:len(r.buf):len(r.buf)], b))
}

func (r *prefixRecognizer) Advance(b byte) bool {
	if !r.CanAdvance(b) {
		return false
	}
	r.buf = append(r.buf, b)
	return true
}

func (r *prefixRecognizer) Pop(n int) { r.buf = r.buf[:len(r.buf)-n] }

// TestFillAgainstPrefixes fills masks of the embedded vocabulary with a recogniser of the
// prefixes of a few words and checks every token: it is in the mask exactly when its bytes
// are a prefix of one of the words.
func TestFillAgainstPrefixes(t *testing.T) {
	m, tok, err := models.Open("default", llama.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	trie := tokentrie.New(tok)
	if trie.VocabSize() != tok.VocabSize() || trie.Nodes() < 2 {
		t.Fatalf("trie of %d tokens has %d nodes", trie.VocabSize(), trie.Nodes())
	}
	for _, words := range [][]string{
		{" the LORD", " thee", " and"},
		{"In the beginning", "\n"},
		{"zzzz"},
	} {
		r := &prefixRecognizer{}
		for _, w := range words {
			r.words = append(r.words, []byte(w))
		}
		mask := tokentrie.NewMask(tok.VocabSize())
		trie.Fill(r, mask)
		if len(r.buf) != 0 {
			t.Fatalf("Fill left %d bytes pushed", len(r.buf))
		}
		for id := range tok.VocabSize() {
			b := tok.TokenBytes(core.TokenID(id))
			want := len(b) > 0 && r.ok(b)
			if got := mask.Has(core.TokenID(id)); got != want {
				t.Fatalf("words %q: token %d (%q) in mask %v, want %v", words, id, b, got, want)
			}
		}
	}
}
