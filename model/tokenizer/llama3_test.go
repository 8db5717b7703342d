package tokenizer_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/internal/fixtures"
	"github.com/loomlm/loom/internal/llama3vocab"
)

// llama3Corpus returns the texts the Llama 3 encoders are compared on: every paragraph of
// loom's README and docs (prose, code, tables, numbers, paths), every pre-tokenizer test
// string, and cases chosen for BPE's corners (whitespace runs, contractions, digits,
// non-Latin scripts, emoji, broken UTF-8 neighbours, special tokens).
func llama3Corpus(t *testing.T) []string {
	t.Helper()
	root := filepath.Dir(fixtures.Path(t))
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"), filepath.Join(root, "testdata", "README.md"))
	var texts []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range strings.Split(string(b), "\n\n") {
			if strings.TrimSpace(p) != "" {
				texts = append(texts, p)
			}
		}
	}
	var pre []struct{ Text string }
	if err := json.Unmarshal(fixtures.Read(t, "..", "model", "tokenizer", "testdata", "pretokenize.json"), &pre); err != nil {
		t.Fatal(err)
	}
	for _, p := range pre {
		texts = append(texts, p.Text)
	}
	texts = append(texts,
		"Hello world!", " Hello", "  leading spaces", "trailing spaces   ", "\n\n\nnewlines\n\n",
		"tabs\tand\t\ttabs", "I'm, you're, he's, we'll, they've, I'd, DON'T, Can'T",
		"1 12 123 1234 12345 123456 3.14159 1,000,000 0x1F2e", "2026-11-25T03:04:07Z",
		"Ünïcödé façade naïve coöperate", "Привет, мир! Как дела?", "日本語のテキストと中文文本", "한국어 텍스트",
		"مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "🙂🙃 emoji 👩‍👩‍👧‍👦 family 🇫🇷",
		"<|begin_of_text|>system<|eot_id|>", "text <|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
		"<|reserved_special_token_7|> and <|not_a_token|>", "func main() {\n\tfmt.Println(\"hi\")\n}\n",
		"   \n\t  \r\n  x", "a\u00a0b\u2009c\u3000d", "ALLCAPS lowercase CamelCase snake_case kebab-case",
		"$ echo \"$HOME\" | grep -E '^/[a-z]+' && ls -la ~/", "{\"json\": [1, 2.5e-3, true, null]}",
		strings.Repeat("ab", 300), strings.Repeat(" ", 100), strings.Repeat("9", 50),
	)
	return texts
}

// llama3Specials matches the special tokens of the corpus.
var llama3Specials = regexp.MustCompile(`<\|(begin_of_text|eot_id|start_header_id|end_header_id|reserved_special_token_\d+)\|>`)

// TestLlama3MatchesReferenceEncoder builds Llama 3's vocabulary (128 256 tokens, 280 147
// merges) as a GGUF from the llama3-tokenizer-js npm package and checks that loom's llama-bpe
// tokenizer gives exactly the ids of that package's own encoder on every text of the corpus,
// with special tokens parsed, and that decoding gives the text back (without its control tokens).
func TestLlama3MatchesReferenceEncoder(t *testing.T) {
	tok := llama3vocab.Tokenizer(t)
	if tok.VocabSize() != llama3vocab.VocabSize {
		t.Fatalf("vocabulary of %d tokens, want %d", tok.VocabSize(), llama3vocab.VocabSize)
	}
	texts := llama3Corpus(t)
	if len(texts) < 300 {
		t.Fatalf("only %d texts in the corpus", len(texts))
	}
	want, err := llama3vocab.Encode(texts)
	if err != nil {
		t.Fatal(err)
	}
	var tokens, mismatches int
	for i, text := range texts {
		got, err := tok.Encode(text, core.EncodeOptions{ParseSpecial: true})
		if err != nil {
			t.Fatalf("text %d %q: %v", i, text, err)
		}
		tokens += len(got)
		if !slices.Equal(got, want[i]) {
			mismatches++
			if mismatches <= 5 {
				t.Errorf("text %d %q:\nloom                %v\nllama3-tokenizer-js %v", i, text, got, want[i])
			}
			continue
		}
		// Decode leaves control tokens out of the text, as llama.cpp's detokenizer does.
		if back, plain := tok.Decode(got), llama3Specials.ReplaceAllString(text, ""); back != plain {
			t.Errorf("text %d: decoded %q, want %q", i, back, plain)
		}
	}
	if mismatches > 0 {
		t.Fatalf("%d of %d texts encode differently", mismatches, len(texts))
	}
	t.Logf("%d texts, %d tokens: identical to llama3-tokenizer-js", len(texts), tokens)
}
