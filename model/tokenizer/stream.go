package tokenizer

import (
	"unicode/utf8"

	"github.com/loomlm/loom/core"
)

// StreamDecoder turns tokens arriving one by one into text, holding back the bytes of a UTF-8
// character until the tokens that complete it arrive. It writes the tokens' bytes as they are
// (see core.Tokenizer.TokenBytes): no leading space is removed. The zero value is not usable;
// make one with NewStreamDecoder.
type StreamDecoder struct {
	tok     core.Tokenizer
	pending []byte
}

// NewStreamDecoder returns a StreamDecoder for tok's tokens.
func NewStreamDecoder(tok core.Tokenizer) *StreamDecoder {
	return &StreamDecoder{tok: tok}
}

// Add takes the next token and returns the text it completes, possibly "". Bytes that can
// never complete a character (invalid UTF-8) are passed on as they are.
func (d *StreamDecoder) Add(id core.TokenID) string {
	d.pending = append(d.pending, d.tok.TokenBytes(id)...)
	cut := completePrefix(d.pending)
	if cut == 0 {
		return ""
	}
	s := string(d.pending[:cut])
	d.pending = append(d.pending[:0], d.pending[cut:]...)
	return s
}

// Flush returns the bytes still held back (an unfinished character at the end of the stream)
// and resets the decoder.
func (d *StreamDecoder) Flush() string {
	s := string(d.pending)
	d.pending = d.pending[:0]
	return s
}

// completePrefix returns the length of b without a trailing incomplete UTF-8 sequence: one
// whose leading byte announces more bytes than follow, all of them continuation bytes.
func completePrefix(b []byte) int {
	for k := 1; k <= min(3, len(b)); k++ {
		c := b[len(b)-k]
		if c < 0x80 {
			return len(b) // ASCII: complete
		}
		if c >= 0xc0 { // a leading byte, k−1 continuation bytes after it
			if !utf8.FullRune(b[len(b)-k:]) {
				return len(b) - k
			}
			return len(b)
		}
	}
	return len(b)
}
