package jsonschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
)

// Position returns the line and column (1-based; columns count bytes) in the JSON text data
// where the value at the JSON pointer ptr begins ("" is the whole document), or false when
// data holds no such value.
func Position(data []byte, ptr string) (line, col int, ok bool) {
	tokens, ok := pointerTokens(ptr)
	if !ok {
		return 0, 0, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	off, ok := findValue(dec, data, tokens)
	if !ok {
		return 0, 0, false
	}
	line, col = lineCol(data, off)
	return line, col, true
}

// findValue returns the offset in data of the value at the path tokens below the value the
// decoder is about to read.
func findValue(dec *json.Decoder, data []byte, tokens []string) (int, bool) {
	start := int(dec.InputOffset())
	for start < len(data) && strings.IndexByte(" \t\r\n:,", data[start]) >= 0 {
		start++
	}
	if len(tokens) == 0 {
		return start, true
	}
	t, err := dec.Token()
	if err != nil {
		return 0, false
	}
	switch t {
	case json.Delim('{'):
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return 0, false
			}
			if k == tokens[0] {
				return findValue(dec, data, tokens[1:])
			}
			if skipValue(dec) != nil {
				return 0, false
			}
		}
	case json.Delim('['):
		want, err := strconv.Atoi(tokens[0])
		if err != nil || want < 0 {
			return 0, false
		}
		for i := 0; dec.More(); i++ {
			if i == want {
				return findValue(dec, data, tokens[1:])
			}
			if skipValue(dec) != nil {
				return 0, false
			}
		}
	}
	return 0, false
}

// skipValue reads one whole value.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

// syntaxPosition returns where in data the JSON error err (from Decode) was found, or false.
func syntaxPosition(data []byte, err error) (line, col int, ok bool) {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se): // a Decoder's offset is that of the byte at fault
		line, col = lineCol(data, int(se.Offset))
		return line, col, true
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		line, col = lineCol(data, len(data))
		return line, col, true
	}
	return 0, 0, false
}

// lineCol returns the 1-based line and byte column of offset off in data.
func lineCol(data []byte, off int) (line, col int) {
	off = min(off, len(data))
	line = 1 + bytes.Count(data[:off], []byte("\n"))
	return line, off - (bytes.LastIndexByte(data[:off], '\n') + 1) + 1
}
