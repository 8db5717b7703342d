// Package tokenizer implements the tokenizers of GGUF models: SentencePiece-style (the
// "llama" vocabulary type of Llama 2, TinyLlama, Mistral) and GPT-2-style byte-level BPE (the
// "gpt2" type of GPT-2, Llama 3, Qwen2, SmolLM), built from a file's "tokenizer.ggml.*"
// metadata. A *Tokenizer implements core.Tokenizer and is safe for concurrent use.
//
// # SentencePiece-style
//
// Spaces are written as "▁" (U+2581) and, by default, the text gets a leading space. Starting
// from single characters, the adjacent pair whose concatenation is the vocabulary entry with
// the highest score is merged, repeatedly, until no pair is in the vocabulary. A character
// without a token is written as its UTF-8 bytes with the byte tokens "<0xNN>", or the unknown
// token when the vocabulary has none.
//
// # Byte-level BPE
//
// The text is first split into words by the model's pre-tokenizer ("tokenizer.ggml.pre":
// gpt-2, llama-bpe, qwen2, smollm, …; the regular expressions of the original tokenizers are
// implemented as hand-written scanners). Each byte of a word is written as one printable
// character (GPT-2's byte↔unicode table), and adjacent symbols are merged in the order of
// the ranked merge list.
//
// # Special tokens
//
// Control, unknown and user-defined tokens are recognised in the text as whole tokens —
// user-defined ones always, control and unknown ones when EncodeOptions.ParseSpecial is set —
// taking at each position the longest that matches. Otherwise their text is encoded like any
// other.
package tokenizer

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/loomlm/loom/core"
)

// TokenType is the kind of a vocabulary entry, as stored in "tokenizer.ggml.token_type".
type TokenType int32

// The token types of GGUF vocabularies.
const (
	Normal      TokenType = 1
	Unknown     TokenType = 2
	Control     TokenType = 3
	UserDefined TokenType = 4
	Unused      TokenType = 5
	Byte        TokenType = 6
)

var tokenTypeNames = map[TokenType]string{Normal: "normal", Unknown: "unknown", Control: "control", UserDefined: "user-defined", Unused: "unused", Byte: "byte"}

// String returns the type's name ("control").
func (t TokenType) String() string {
	if s, ok := tokenTypeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("TokenType(%d)", int32(t))
}

// The vocabulary models (values of "tokenizer.ggml.model").
const (
	// ModelSPM is the SentencePiece-style vocabulary type.
	ModelSPM = "llama"
	// ModelBPE is the byte-level BPE vocabulary type.
	ModelBPE = "gpt2"
)

// Vocab is everything a Tokenizer is built from. FromGGUF fills one from a file's metadata;
// New builds the Tokenizer.
type Vocab struct {
	// Model is ModelSPM or ModelBPE.
	Model string
	// Pre names the pre-tokenizer of a BPE vocabulary (see Pretokenizers); "" means
	// "default".
	Pre string
	// Tokens are the vocabulary entries, indexed by id.
	Tokens []string
	// Scores rank SentencePiece merges (higher merges first); nil means all 0.
	Scores []float32
	// Types are the token types; nil means all Normal.
	Types []TokenType
	// Merges are a BPE vocabulary's merges, "left right", in rank order.
	Merges []string
	// BOS, EOS, UNK and PAD are special ids; -1 means none.
	BOS, EOS, UNK, PAD core.TokenID
	// EndOfGeneration lists ids besides EOS that end a generation (end-of-turn and the like).
	EndOfGeneration []core.TokenID
	// AddBOS and AddEOS add BOS before and EOS after a text encoded with AddSpecial.
	AddBOS, AddEOS bool
	// AddSpacePrefix writes a space before text that starts a SentencePiece-style input or
	// follows a special token (and Decode removes the first one).
	AddSpacePrefix bool
}

// Tokenizer converts between text and token ids for one vocabulary.
type Tokenizer struct {
	model   string
	pre     string
	tokens  []string
	types   []TokenType
	scores  []float32
	bytes   [][]byte
	toID    map[string]core.TokenID
	special core.SpecialTokens

	addBOS, addEOS, addSpacePrefix bool

	// specials lists the tokens recognised in text, by first byte, longest first.
	specials [256][]specialToken

	spm spmState
	bpe *bpeState
}

type specialToken struct {
	text   string
	id     core.TokenID
	always bool // user-defined: matched even without ParseSpecial
}

var _ core.Tokenizer = (*Tokenizer)(nil)

// New builds a Tokenizer from v.
func New(v Vocab) (*Tokenizer, error) {
	n := len(v.Tokens)
	if n == 0 {
		return nil, fmt.Errorf("tokenizer: empty vocabulary")
	}
	if v.Scores != nil && len(v.Scores) != n {
		return nil, fmt.Errorf("tokenizer: %d scores for %d tokens", len(v.Scores), n)
	}
	if v.Types != nil && len(v.Types) != n {
		return nil, fmt.Errorf("tokenizer: %d token types for %d tokens", len(v.Types), n)
	}
	t := &Tokenizer{
		model:          v.Model,
		pre:            v.Pre,
		tokens:         v.Tokens,
		scores:         v.Scores,
		types:          v.Types,
		addBOS:         v.AddBOS,
		addEOS:         v.AddEOS,
		addSpacePrefix: v.AddSpacePrefix && v.Model == ModelSPM,
	}
	if t.scores == nil {
		t.scores = make([]float32, n)
	}
	if t.types == nil {
		t.types = make([]TokenType, n)
		for i := range t.types {
			t.types[i] = Normal
		}
	}
	t.toID = make(map[string]core.TokenID, n)
	for i, s := range t.tokens {
		t.toID[s] = core.TokenID(i) // a repeated entry resolves to its last id
	}
	valid := func(name string, id core.TokenID) (core.TokenID, error) {
		if id < -1 || int(id) >= n {
			return -1, fmt.Errorf("tokenizer: %s id %d is outside the vocabulary of %d tokens", name, id, n)
		}
		return id, nil
	}
	var err error
	sp := &t.special
	if sp.BOS, err = valid("BOS", v.BOS); err != nil {
		return nil, err
	}
	if sp.EOS, err = valid("EOS", v.EOS); err != nil {
		return nil, err
	}
	if sp.UNK, err = valid("UNK", v.UNK); err != nil {
		return nil, err
	}
	if sp.PAD, err = valid("PAD", v.PAD); err != nil {
		return nil, err
	}
	if t.addBOS && sp.BOS < 0 {
		return nil, fmt.Errorf("tokenizer: BOS is to be added but the vocabulary has no BOS id")
	}
	if t.addEOS && sp.EOS < 0 {
		return nil, fmt.Errorf("tokenizer: EOS is to be added but the vocabulary has no EOS id")
	}
	if sp.EOS >= 0 {
		sp.EndOfGeneration = append(sp.EndOfGeneration, sp.EOS)
	}
	for _, id := range v.EndOfGeneration {
		if _, err := valid("end-of-generation", id); err != nil {
			return nil, err
		}
		if id >= 0 && !slices.Contains(sp.EndOfGeneration, id) {
			sp.EndOfGeneration = append(sp.EndOfGeneration, id)
		}
	}

	switch v.Model {
	case ModelSPM:
		t.initSPM()
	case ModelBPE:
		if err := t.initBPE(v.Merges); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("tokenizer: vocabulary model %q is not supported (supported: %q, %q)", v.Model, ModelSPM, ModelBPE)
	}
	t.initBytes()
	t.initSpecials()
	return t, nil
}

// initBytes computes what each token contributes to text, all in one buffer.
func (t *Tokenizer) initBytes() {
	var buf []byte
	ends := make([]int, len(t.tokens))
	for id, s := range t.tokens {
		switch t.types[id] {
		case Control:
		case Unknown:
			buf = append(buf, "\uFFFD"...)
		case Byte:
			if b, ok := parseByteToken(s); ok {
				buf = append(buf, b)
				break
			}
			buf = t.appendText(buf, s)
		case UserDefined:
			if t.model == ModelBPE {
				buf = append(buf, s...)
				break
			}
			buf = t.appendText(buf, s)
		default:
			buf = t.appendText(buf, s)
		}
		ends[id] = len(buf)
	}
	t.bytes = make([][]byte, len(t.tokens))
	start := 0
	for id, end := range ends {
		if end > start {
			t.bytes[id] = buf[start:end:end]
		}
		start = end
	}
}

// appendText appends the text a normal token stands for: a SentencePiece piece with "▁" as a
// space, or a byte-level BPE token's bytes.
func (t *Tokenizer) appendText(buf []byte, s string) []byte {
	if t.model == ModelSPM {
		return append(buf, strings.ReplaceAll(s, spmSpace, " ")...)
	}
	return appendUnmapped(buf, s)
}

// parseByteToken reads a byte token "<0xNN>".
func parseByteToken(s string) (byte, bool) {
	if len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
		return 0, false
	}
	var b byte
	for _, c := range []byte(s[3:5]) {
		switch {
		case '0' <= c && c <= '9':
			b = b<<4 | (c - '0')
		case 'A' <= c && c <= 'F':
			b = b<<4 | (c - 'A' + 10)
		case 'a' <= c && c <= 'f':
			b = b<<4 | (c - 'a' + 10)
		default:
			return 0, false
		}
	}
	return b, true
}

func (t *Tokenizer) initSpecials() {
	for id, typ := range t.types {
		if typ != Control && typ != UserDefined && typ != Unknown {
			continue
		}
		s := t.tokens[id]
		if s == "" {
			continue
		}
		t.specials[s[0]] = append(t.specials[s[0]], specialToken{text: s, id: core.TokenID(id), always: typ == UserDefined})
	}
	for i := range t.specials {
		slices.SortStableFunc(t.specials[i], func(a, b specialToken) int { return len(b.text) - len(a.text) })
	}
}

// matchSpecial returns the longest special token at the start of s.
func (t *Tokenizer) matchSpecial(s string, parse bool) (specialToken, bool) {
	for _, sp := range t.specials[s[0]] {
		if (parse || sp.always) && strings.HasPrefix(s, sp.text) {
			return sp, true
		}
	}
	return specialToken{}, false
}

// Encode tokenises text: special tokens as described in the package documentation, the text
// between them with the vocabulary's algorithm; with AddSpecial, BOS and EOS as the vocabulary
// asks.
func (t *Tokenizer) Encode(text string, opts core.EncodeOptions) ([]core.TokenID, error) {
	out := make([]core.TokenID, 0, len(text)/3+2)
	if opts.AddSpecial && t.addBOS {
		out = append(out, t.special.BOS)
	}
	prevSpecial := true // SentencePiece: a fragment at the start or after a special token gets a space
	start := 0
	var err error
	flush := func(end int) {
		if end > start && err == nil {
			out, err = t.encodeFragment(out, text[start:end], prevSpecial)
			prevSpecial = false
		}
	}
	for i := 0; i < len(text); i++ {
		if t.specials[text[i]] == nil {
			continue
		}
		sp, ok := t.matchSpecial(text[i:], opts.ParseSpecial)
		if !ok {
			continue
		}
		flush(i)
		out = append(out, sp.id)
		prevSpecial = true
		i += len(sp.text) - 1
		start = i + 1
	}
	flush(len(text))
	if err != nil {
		return nil, err
	}
	if opts.AddSpecial && t.addEOS {
		out = append(out, t.special.EOS)
	}
	return out, nil
}

func (t *Tokenizer) encodeFragment(out []core.TokenID, s string, prevSpecial bool) ([]core.TokenID, error) {
	if t.model == ModelSPM {
		return t.encodeSPM(out, s, t.addSpacePrefix && prevSpecial)
	}
	return t.encodeBPE(out, s), nil
}

// Decode returns the text of ids: their bytes joined, then read as UTF-8 (invalid sequences
// are kept as they are). For a vocabulary that writes a leading space (SentencePiece-style),
// the space the first text token starts with is removed, so that Decode(Encode(s)) is s.
func (t *Tokenizer) Decode(ids []core.TokenID) string {
	var b []byte
	first := true
	for _, id := range ids {
		tb := t.TokenBytes(id)
		if len(tb) == 0 {
			continue
		}
		if first && t.addSpacePrefix && tb[0] == ' ' && t.types[id] != Byte {
			tb = tb[1:]
		}
		first = false
		b = append(b, tb...)
	}
	return string(b)
}

// TokenBytes returns the bytes id contributes to text: a SentencePiece piece with "▁" as a
// space, a byte token's byte, a BPE token's decoded bytes, nothing for control tokens, and
// U+FFFD for the unknown token. The slice must not be modified. Ids outside the vocabulary
// contribute nothing.
func (t *Tokenizer) TokenBytes(id core.TokenID) []byte {
	if id < 0 || int(id) >= len(t.bytes) {
		return nil
	}
	return t.bytes[id]
}

// Piece returns the vocabulary entry of id as stored, or "" for an id outside the vocabulary.
func (t *Tokenizer) Piece(id core.TokenID) string {
	if id < 0 || int(id) >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// Type returns the token type of id (0 for an id outside the vocabulary).
func (t *Tokenizer) Type(id core.TokenID) TokenType {
	if id < 0 || int(id) >= len(t.types) {
		return 0
	}
	return t.types[id]
}

// ID returns the id of a vocabulary entry.
func (t *Tokenizer) ID(piece string) (core.TokenID, bool) {
	id, ok := t.toID[piece]
	return id, ok
}

// VocabSize returns the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// Special returns the special token ids. The EndOfGeneration slice must not be modified.
func (t *Tokenizer) Special() core.SpecialTokens { return t.special }

// Model returns the vocabulary type, ModelSPM or ModelBPE.
func (t *Tokenizer) Model() string { return t.model }

// Pre returns the name of a BPE vocabulary's pre-tokenizer ("" for SentencePiece-style).
func (t *Tokenizer) Pre() string {
	if t.model != ModelBPE {
		return ""
	}
	return t.pre
}

// AddsBOS reports whether Encode with AddSpecial starts the tokens with BOS.
func (t *Tokenizer) AddsBOS() bool { return t.addBOS }

// charLen returns the length of the character at s[i]: its UTF-8 encoding, or 1 for a byte
// that does not start a valid one (such bytes are tokenised one by one and come back as they
// were).
func charLen(s string, i int) int {
	if s[i] < utf8.RuneSelf {
		return 1
	}
	_, n := utf8.DecodeRuneInString(s[i:])
	return n
}

// resetCaches empties the caches of tokenised words.
func (t *Tokenizer) resetCaches() {
	t.spm.cache.reset()
	if t.bpe != nil {
		t.bpe.cache.reset()
	}
}
