package main

import (
	"io"
	"os"
	"strconv"
	"strings"
	"unicode"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/tokenizer"
)

func init() {
	register(&command{
		name:    "tokenize",
		summary: "print the token ids (or pieces) of texts with a GGUF model's tokenizer",
		run:     runTokenize,
	})
}

// fileList is a repeatable flag of file names.
type fileList []string

func (l *fileList) String() string     { return strings.Join(*l, ",") }
func (l *fileList) Set(s string) error { *l = append(*l, s); return nil }

func runTokenize(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tokenize", "--model FILE.gguf [--no-bos] [--special] [--pieces] [TEXT... | --file F]", stderr)
	model := fs.String("model", "", "GGUF `file` whose tokenizer to use (a vocabulary-only file will do)")
	noBOS := fs.Bool("no-bos", false, "do not add the BOS/EOS tokens the model asks for")
	special := fs.Bool("special", false, "recognise special tokens written in the text (like <s>)")
	showPieces := fs.Bool("pieces", false, "print the vocabulary pieces instead of ids (quoted where they hold spaces)")
	var files fileList
	fs.Var(&files, "file", "tokenise the bytes of `F` exactly as they are (- for standard input); repeatable")
	texts, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if *model == "" || (len(texts) == 0 && len(files) == 0) {
		fs.Usage()
		return errUsage
	}
	inputs := texts
	for _, f := range files {
		var b []byte
		if f == "-" {
			b, err = io.ReadAll(os.Stdin)
		} else {
			b, err = os.ReadFile(f)
		}
		if err != nil {
			return err
		}
		inputs = append(inputs, string(b))
	}
	tok, err := tokenizer.Load(*model)
	if err != nil {
		return err
	}
	opts := core.EncodeOptions{AddSpecial: !*noBOS, ParseSpecial: *special}
	var sb strings.Builder
	for _, text := range inputs {
		ids, err := tok.Encode(text, opts)
		if err != nil {
			return err
		}
		for i, id := range ids {
			if i > 0 {
				sb.WriteByte(' ')
			}
			if *showPieces {
				sb.WriteString(displayPiece(tok.Piece(id)))
			} else {
				sb.WriteString(strconv.Itoa(int(id)))
			}
		}
		sb.WriteByte('\n')
	}
	_, err = io.WriteString(stdout, sb.String())
	return err
}

// displayPiece returns a piece as it is, or Go-quoted when it is empty or holds spaces or
// characters that do not print.
func displayPiece(p string) string {
	if p == "" || strings.IndexFunc(p, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) || r == '"' }) >= 0 {
		return strconv.Quote(p)
	}
	return p
}
