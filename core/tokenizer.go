package core

// EncodeOptions tune Tokenizer.Encode.
type EncodeOptions struct {
	// AddSpecial adds the tokens the model's metadata asks for around a text (BOS, and EOS
	// where the model wants it).
	AddSpecial bool
	// ParseSpecial recognises special and control tokens written in the text (like "<s>")
	// as single tokens instead of encoding their characters.
	ParseSpecial bool
}

// SpecialTokens lists a vocabulary's special ids; -1 means none.
type SpecialTokens struct {
	BOS, EOS, UNK, PAD TokenID
	// EndOfGeneration lists every token that ends a generation (EOS, EOT, …), EOS included.
	EndOfGeneration []TokenID
}

// Tokenizer converts between text and token ids.
type Tokenizer interface {
	// Encode tokenises text.
	Encode(text string, opts EncodeOptions) ([]TokenID, error)
	// Decode turns ids into text. Bytes split across tokens are joined before UTF-8 decoding.
	Decode(ids []TokenID) string
	// TokenBytes returns the bytes token id contributes to generated text (control tokens
	// contribute none). The result must not be modified.
	TokenBytes(id TokenID) []byte
	// Piece returns the vocabulary entry of id as stored (for display).
	Piece(id TokenID) string
	// VocabSize is the number of tokens.
	VocabSize() int
	// Special returns the special token ids.
	Special() SpecialTokens
}
