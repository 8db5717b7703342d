package tokenizer

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/loomlm/loom/internal/fixtures"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/gguf"
)

// spmVocab builds a small SentencePiece-style vocabulary: <unk>, <s>, </s>, the 256 byte
// tokens (ids 3–258) when withBytes, then pieces with scores, then extra special tokens.
func spmVocab(withBytes bool, pieces map[string]float32, specials map[string]TokenType) Vocab {
	v := Vocab{Model: ModelSPM, BOS: 1, EOS: 2, UNK: 0, PAD: -1, AddBOS: true, AddSpacePrefix: true}
	add := func(s string, score float32, typ TokenType) {
		v.Tokens = append(v.Tokens, s)
		v.Scores = append(v.Scores, score)
		v.Types = append(v.Types, typ)
	}
	add("<unk>", 0, Unknown)
	add("<s>", 0, Control)
	add("</s>", 0, Control)
	if withBytes {
		for b := range 256 {
			add(fmt.Sprintf("<0x%02X>", b), 0, Byte)
		}
	}
	for _, p := range sortedKeys(pieces) {
		add(p, pieces[p], Normal)
	}
	for _, s := range sortedKeys(specials) {
		add(s, 0, specials[s])
	}
	return v
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func mustNew(t testing.TB, v Vocab) *Tokenizer {
	t.Helper()
	tok, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// pieces returns the vocabulary entries of ids.
func pieces(tok *Tokenizer, ids []core.TokenID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = tok.Piece(id)
	}
	return out
}

var testPieces = map[string]float32{
	"▁": -1, "a": -2, "b": -2, "c": -2, "h": -2, "i": -2, "▁a": -3, "ab": -4, "bc": -1.5, "▁h": -3, "▁hi": -2.5, "hi": -9, "▁▁": -5,
}

var testSpecials = map[string]TokenType{"<|user|>": UserDefined, "<|im": Control, "<|im_end|>": Control}

func TestSPMEncode(t *testing.T) {
	tok := mustNew(t, spmVocab(true, testPieces, testSpecials))
	tests := []struct {
		name string
		text string
		opts core.EncodeOptions
		want []string
	}{
		{"empty", "", core.EncodeOptions{}, []string{}},
		{"empty with BOS", "", core.EncodeOptions{AddSpecial: true}, []string{"<s>"}},
		{"space prefix", "a", core.EncodeOptions{}, []string{"▁a"}},
		{"best score first", "abc", core.EncodeOptions{}, []string{"▁a", "bc"}},
		{"spaces", " hi  a", core.EncodeOptions{}, []string{"▁", "▁hi", "▁", "▁a"}},
		{"byte fallback", "hé", core.EncodeOptions{}, []string{"▁h", "<0xC3>", "<0xA9>"}},
		{"byte fallback of a 4-byte character", "🦙", core.EncodeOptions{}, []string{"▁", "<0xF0>", "<0x9F>", "<0xA6>", "<0x99>"}},
		{"newline", "a\nb", core.EncodeOptions{}, []string{"▁a", "<0x0A>", "b"}},
		{"BOS", "hi", core.EncodeOptions{AddSpecial: true}, []string{"<s>", "▁hi"}},
		{"special as text", "<s>hi", core.EncodeOptions{}, []string{"▁", "<0x3C>", "<0x73>", "<0x3E>", "hi"}},
		{"parse special", "<s>hi</s>", core.EncodeOptions{ParseSpecial: true}, []string{"<s>", "▁hi", "</s>"}},
		{"space after special", "a<s>b", core.EncodeOptions{ParseSpecial: true}, []string{"▁a", "<s>", "▁", "b"}},
		{"user-defined always", "a<|user|>hi", core.EncodeOptions{}, []string{"▁a", "<|user|>", "▁hi"}},
		{"longest special", "<|im_end|><|im", core.EncodeOptions{ParseSpecial: true}, []string{"<|im_end|>", "<|im"}},
		{"control as text", "<|im", core.EncodeOptions{}, []string{"▁", "<0x3C>", "<0x7C>", "i", "<0x6D>"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ids, err := tok.Encode(tc.text, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := pieces(tok, ids); !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			if !tc.opts.ParseSpecial && !strings.Contains(tc.text, "<|user|>") {
				if got := tok.Decode(ids); got != tc.text {
					t.Errorf("Decode gives %q, want %q", got, tc.text)
				}
			}
		})
	}
}

func TestSPMUnknown(t *testing.T) {
	tok := mustNew(t, spmVocab(false, testPieces, nil))
	ids, err := tok.Encode("aé", core.EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pieces(tok, ids); !slices.Equal(got, []string{"▁a", "<unk>"}) {
		t.Errorf("got %q", got)
	}
	if got := tok.Decode(ids); got != "a\uFFFD" {
		t.Errorf("Decode gives %q", got)
	}
	v := spmVocab(false, testPieces, nil)
	v.UNK = -1
	tok = mustNew(t, v)
	if _, err := tok.Encode("é", core.EncodeOptions{}); err == nil || !strings.Contains(err.Error(), `"é"`) {
		t.Errorf("no unknown token: %v", err)
	}
}

func TestTokenBytes(t *testing.T) {
	tok := mustNew(t, spmVocab(true, testPieces, testSpecials))
	id := func(s string) core.TokenID {
		id, ok := tok.ID(s)
		if !ok {
			t.Fatalf("no %q", s)
		}
		return id
	}
	tests := []struct {
		id   core.TokenID
		want string
	}{
		{id("▁hi"), " hi"},
		{id("▁▁"), "  "},
		{id("<0x0A>"), "\n"},
		{id("<0xFF>"), "\xff"},
		{id("<s>"), ""},
		{id("<|im_end|>"), ""},
		{id("<|user|>"), "<|user|>"},
		{id("<unk>"), "\uFFFD"},
		{-1, ""},
		{core.TokenID(tok.VocabSize()), ""},
	}
	for _, tc := range tests {
		if got := string(tok.TokenBytes(tc.id)); got != tc.want {
			t.Errorf("TokenBytes(%d %q) = %q, want %q", tc.id, tok.Piece(tc.id), got, tc.want)
		}
	}
	if tok.Piece(-5) != "" || tok.Type(id("<0x41>")) != Byte || tok.Type(-1) != 0 {
		t.Error("Piece or Type of odd ids")
	}
}

func TestSpecial(t *testing.T) {
	tok := mustNew(t, spmVocab(true, testPieces, testSpecials))
	sp := tok.Special()
	if sp.BOS != 1 || sp.EOS != 2 || sp.UNK != 0 || sp.PAD != -1 || !slices.Equal(sp.EndOfGeneration, []core.TokenID{2}) {
		t.Errorf("Special() = %+v", sp)
	}
	v := spmVocab(true, testPieces, testSpecials)
	v.AddEOS = true
	v.EndOfGeneration = []core.TokenID{2, 5}
	tok = mustNew(t, v)
	ids, _ := tok.Encode("a", core.EncodeOptions{AddSpecial: true})
	if got := pieces(tok, ids); !slices.Equal(got, []string{"<s>", "▁a", "</s>"}) {
		t.Errorf("with EOS: %q", got)
	}
	if got := tok.Special().EndOfGeneration; !slices.Equal(got, []core.TokenID{2, 5}) {
		t.Errorf("EndOfGeneration = %v", got)
	}
}

// bpeVocab builds a byte-level BPE vocabulary: the 256 byte characters, then the results of
// merges, then extra tokens.
func bpeVocab(pre string, merges []string, extra map[string]TokenType) Vocab {
	v := Vocab{Model: ModelBPE, Pre: pre, BOS: -1, EOS: -1, UNK: -1, PAD: -1, Merges: merges}
	for b := range 256 {
		v.Tokens = append(v.Tokens, byteString[b])
	}
	for _, m := range merges {
		v.Tokens = append(v.Tokens, strings.Replace(m, " ", "", 1))
	}
	for _, s := range sortedKeys(extra) {
		v.Tokens = append(v.Tokens, s)
	}
	v.Types = make([]TokenType, len(v.Tokens))
	for i := range v.Types {
		v.Types[i] = Normal
	}
	for i, s := range sortedKeys(extra) {
		v.Types[256+len(merges)+i] = extra[s]
	}
	return v
}

func TestBPEEncode(t *testing.T) {
	merges := []string{"Ġ t", "l l", "e ll", "ell o", "h ello", "h e", "Ġt he", "c a", "ca t"}
	extra := map[string]TokenType{"<|endoftext|>": Control, "<tool>": UserDefined, "cats": Normal}
	tests := []struct {
		pre  string
		text string
		opts core.EncodeOptions
		want []string
	}{
		{"gpt-2", "the hello", core.EncodeOptions{}, []string{"t", "he", "Ġ", "hello"}},
		{"gpt-2", " the", core.EncodeOptions{}, []string{"Ġthe"}},
		{"gpt-2", "hello\n\n", core.EncodeOptions{}, []string{"hello", "Ċ", "Ċ"}},
		{"gpt-2", "é", core.EncodeOptions{}, []string{"Ã", "©"}},
		{"gpt-2", "cats", core.EncodeOptions{}, []string{"cat", "s"}},
		{"llama-bpe", "cats", core.EncodeOptions{}, []string{"cats"}}, // a whole word in the vocabulary is taken as is
		{"qwen2", "cats", core.EncodeOptions{}, []string{"cat", "s"}},
		{"gpt-2", "a<|endoftext|>", core.EncodeOptions{}, slices.Concat([]string{"a", "<", "|"}, chars("endoftext"), []string{"|", ">"})},
		{"gpt-2", "a<|endoftext|>", core.EncodeOptions{ParseSpecial: true}, []string{"a", "<|endoftext|>"}},
		{"gpt-2", "x<tool> the", core.EncodeOptions{}, []string{"x", "<tool>", "Ġthe"}},
	}
	for _, tc := range tests {
		t.Run(tc.pre+" "+tc.text, func(t *testing.T) {
			tok := mustNew(t, bpeVocab(tc.pre, merges, extra))
			ids, err := tok.Encode(tc.text, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := pieces(tok, ids); !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			if !tc.opts.ParseSpecial && !strings.Contains(tc.text, "<tool>") {
				if d := tok.Decode(ids); d != tc.text {
					t.Errorf("Decode gives %q", d)
				}
			}
		})
	}
}

// chars splits s into its characters.
func chars(s string) []string { return strings.Split(s, "") }

func TestBPETokenBytes(t *testing.T) {
	tok := mustNew(t, bpeVocab("gpt-2", []string{"Ġ t"}, map[string]TokenType{"<|endoftext|>": Control, "<tool>": UserDefined}))
	for _, c := range []struct{ piece, want string }{{"Ġt", " t"}, {"Ċ", "\n"}, {"Ã", "\xc3"}, {"<|endoftext|>", ""}, {"<tool>", "<tool>"}} {
		id, _ := tok.ID(c.piece)
		if got := string(tok.TokenBytes(id)); got != c.want {
			t.Errorf("TokenBytes(%q) = %q, want %q", c.piece, got, c.want)
		}
	}
	// Bytes of one character split over tokens are joined.
	ids, _ := tok.Encode("日本", core.EncodeOptions{})
	if len(ids) != 6 || tok.Decode(ids) != "日本" {
		t.Errorf("ids %v decode to %q", ids, tok.Decode(ids))
	}
}

func TestNewErrors(t *testing.T) {
	spm := spmVocab(true, testPieces, nil)
	tests := []struct {
		name string
		v    Vocab
		want string
	}{
		{"empty", Vocab{Model: ModelSPM}, "empty vocabulary"},
		{"model", func() Vocab { v := spm; v.Model = "bert"; return v }(), `vocabulary model "bert" is not supported`},
		{"scores", func() Vocab { v := spm; v.Scores = v.Scores[:3]; return v }(), "3 scores for"},
		{"types", func() Vocab { v := spm; v.Types = v.Types[:3]; return v }(), "3 token types for"},
		{"bos range", func() Vocab { v := spm; v.BOS = 99999; return v }(), "BOS id 99999 is outside"},
		{"pre", bpeVocab("kimi-k2", []string{"a b"}, nil), `pre-tokenizer "kimi-k2" (tokenizer.ggml.pre) is not supported; supported: a.x-4.0, bailingmoe, `},
		{"no merges", bpeVocab("gpt-2", nil, nil), "without merges"},
		{"bad merge", bpeVocab("gpt-2", []string{"ab"}, nil), `merge 0 "ab"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.v)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// writeVocab writes a vocabulary-only GGUF file with the given metadata.
func writeVocab(t *testing.T, kvs ...gguf.KV) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	for _, kv := range kvs {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Read(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestFromGGUF(t *testing.T) {
	tokens := []string{"<unk>", "<s>", "</s>", "▁a", "<|eot_id|>", "<|fim_pad|>"}
	types := []int32{2, 3, 3, 1, 3, 3}
	f := writeVocab(t,
		gguf.KV{Key: "tokenizer.ggml.model", Value: "llama"},
		gguf.KV{Key: "tokenizer.ggml.tokens", Value: tokens},
		gguf.KV{Key: "tokenizer.ggml.token_type", Value: types},
	)
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	sp := tok.Special()
	if sp.BOS != 1 || sp.EOS != 2 || sp.UNK != 0 || sp.PAD != -1 || !slices.Equal(sp.EndOfGeneration, []core.TokenID{2, 4, 5}) || !tok.AddsBOS() || tok.Model() != ModelSPM || tok.Pre() != "" {
		t.Errorf("defaults: %+v, adds BOS %v", sp, tok.AddsBOS())
	}
	ids, _ := tok.Encode("a", core.EncodeOptions{AddSpecial: true})
	if !slices.Equal(ids, []core.TokenID{1, 3}) {
		t.Errorf("Encode: %v", ids)
	}

	tests := []struct {
		name string
		kvs  []gguf.KV
		want string
	}{
		{"no model", nil, `"tokenizer.ggml.model": not found`},
		{"model type", []gguf.KV{{Key: "tokenizer.ggml.model", Value: uint32(1)}}, `"tokenizer.ggml.model": is uint32, want string`},
		{"unsupported model", []gguf.KV{{Key: "tokenizer.ggml.model", Value: "t5"}}, `tokenizer.ggml.model "t5" is not supported`},
		{"no tokens", []gguf.KV{{Key: "tokenizer.ggml.model", Value: "llama"}}, `"tokenizer.ggml.tokens": not found`},
		{"scores length", []gguf.KV{{Key: "tokenizer.ggml.model", Value: "llama"}, {Key: "tokenizer.ggml.tokens", Value: tokens}, {Key: "tokenizer.ggml.scores", Value: []float32{1}}}, "tokenizer.ggml.scores has 1 entries for 6 tokens"},
		{"types type", []gguf.KV{{Key: "tokenizer.ggml.model", Value: "llama"}, {Key: "tokenizer.ggml.tokens", Value: tokens}, {Key: "tokenizer.ggml.token_type", Value: []string{"x"}}}, `"tokenizer.ggml.token_type": is array of string, want array of int32`},
		{"bos type", []gguf.KV{{Key: "tokenizer.ggml.model", Value: "llama"}, {Key: "tokenizer.ggml.tokens", Value: tokens}, {Key: "tokenizer.ggml.bos_token_id", Value: "1"}}, `"tokenizer.ggml.bos_token_id": is string`},
		{"add bos type", []gguf.KV{{Key: "tokenizer.ggml.model", Value: "llama"}, {Key: "tokenizer.ggml.tokens", Value: tokens}, {Key: "tokenizer.ggml.add_bos_token", Value: uint8(1)}}, `"tokenizer.ggml.add_bos_token": is uint8, want bool`},
		{"no merges", []gguf.KV{{Key: "tokenizer.ggml.model", Value: "gpt2"}, {Key: "tokenizer.ggml.tokens", Value: tokens}}, `"tokenizer.ggml.merges": not found`},
		{"unsupported pre", []gguf.KV{{Key: "tokenizer.ggml.model", Value: "gpt2"}, {Key: "tokenizer.ggml.tokens", Value: tokens}, {Key: "tokenizer.ggml.merges", Value: []string{"a b"}}, {Key: "tokenizer.ggml.pre", Value: "afmoe"}}, `pre-tokenizer "afmoe"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromGGUF(writeVocab(t, tc.kvs...))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestStories260K(t *testing.T) {
	tok, err := Load(filepath.Join(fixtures.Path(t), "models", "stories260K-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := tok.Encode("Once upon a time", core.EncodeOptions{AddSpecial: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := idString(ids), "1 373 265 426 453 335 334 264 417"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if got := tok.Decode(ids); got != "Once upon a time" {
		t.Errorf("Decode gives %q", got)
	}
	if tok.VocabSize() != 512 {
		t.Errorf("VocabSize() = %d", tok.VocabSize())
	}
}

func TestLoadErrors(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "none.gguf")); err == nil {
		t.Error("missing file: no error")
	}
}

func TestStreamDecoder(t *testing.T) {
	tok := mustNew(t, spmVocab(true, testPieces, testSpecials))
	text := "hi 🦙é a\xff"
	ids, err := tok.Encode(text, core.EncodeOptions{AddSpecial: true})
	if err != nil {
		t.Fatal(err)
	}
	d := NewStreamDecoder(tok)
	var parts []string
	for _, id := range ids {
		s := d.Add(id)
		parts = append(parts, s)
	}
	parts = append(parts, d.Flush())
	joined := strings.Join(parts, "")
	if joined != " "+text {
		t.Fatalf("stream gives %q, want %q", joined, " "+text)
	}
	for _, p := range parts {
		if !strings.Contains(p, "\xff") && !utf8.ValidString(p) {
			t.Errorf("part %q is not whole characters", p)
		}
	}
	if parts[len(parts)-1] != "" {
		t.Errorf("Flush after a complete stream gives %q", parts[len(parts)-1])
	}
	// An unfinished character is held until Flush.
	d = NewStreamDecoder(tok)
	f0, _ := tok.ID("<0xF0>")
	f9, _ := tok.ID("<0x9F>")
	if d.Add(f0) != "" || d.Add(f9) != "" || d.Flush() != "\xf0\x9f" || d.Flush() != "" {
		t.Error("held bytes")
	}
}

func TestCompletePrefix(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"", 0}, {"abc", 3}, {"a\xe6", 1}, {"a\xe6\x97", 1}, {"a\xe6\x97\xa5", 4}, {"\xf0\x9f\xa6", 0},
		{"\xf0\x9f\xa6\x99", 4}, {"a\x97", 2}, {"\xff", 1}, {"\xe6a", 2}, {"\xc3", 0}, {"\x9f\x9f\x9f\x9f", 4},
	}
	for _, tc := range tests {
		if got := completePrefix([]byte(tc.in)); got != tc.want {
			t.Errorf("completePrefix(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}
