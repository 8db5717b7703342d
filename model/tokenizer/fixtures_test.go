package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomlm/loom/internal/fixtures"

	"github.com/loomlm/loom/core"
)

// vocabCase is one input of a vocabulary fixture and its expected ids.
type vocabCase struct {
	text string
	want string
}

// readVocabFixture reads name.inp (inputs separated by "\n__ggml_vocab_test__\n") and
// name.out (one line of ids per input).
func readVocabFixture(t *testing.T, path string) []vocabCase {
	t.Helper()
	inp, err := os.ReadFile(path + ".inp")
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(path + ".out")
	if err != nil {
		t.Fatal(err)
	}
	inputs := strings.Split(string(inp), "\n__ggml_vocab_test__\n")
	if inputs[len(inputs)-1] == "" {
		inputs = inputs[:len(inputs)-1]
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(inputs) {
		t.Fatalf("%s: %d inputs, %d expected lines", path, len(inputs), len(lines))
	}
	cases := make([]vocabCase, len(inputs))
	for i := range inputs {
		cases[i] = vocabCase{inputs[i], strings.Join(strings.Fields(lines[i]), " ")}
	}
	return cases
}

func idString(ids []core.TokenID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, " ")
}

func TestVocabFixtures(t *testing.T) {
	dir := filepath.Join(fixtures.Path(t), "vocab")
	for _, name := range []string{"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			tok, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range readVocabFixture(t, path) {
				ids, err := tok.Encode(c.text, core.EncodeOptions{})
				if err != nil {
					t.Fatalf("case %d %q: %v", i, c.text, err)
				}
				if got := idString(ids); got != c.want {
					t.Errorf("case %d %q:\n got %s\nwant %s", i, c.text, got, c.want)
				}
				if got := tok.Decode(ids); got != c.text {
					t.Errorf("case %d: Decode gives %q, want %q", i, got, c.text)
				}
			}
		})
	}
}
