package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/loomlm/loom/pipeline"
)

func init() {
	register(&command{
		name:    "validate",
		summary: "check pipeline files: parameters, types, ranges, model, plugins",
		run:     runValidate,
	})
}

func runValidate(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("validate", "PIPELINE.toml...", stderr)
	files, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		fs.Usage()
		return errUsage
	}
	failed := false
	for _, f := range files {
		b, err := pipeline.LoadAndBuild(f, pipeline.Options{StartPlugins: startPlugins})
		if err != nil {
			failed = true
			printFileErrors(stderr, f, err)
			continue
		}
		if err := b.Close(); err != nil {
			fmt.Fprintf(stderr, "%s: closing: %v\n", f, err)
		}
		if len(files) > 1 {
			fmt.Fprintf(stdout, "%s: ok\n", f)
		} else {
			fmt.Fprintln(stdout, "ok")
		}
	}
	if failed {
		return &exitError{code: 1}
	}
	return nil
}

// printFileErrors prints the errors of one pipeline file, one a line: each pipeline error
// already names its file and line; any other error is prefixed with the file.
func printFileErrors(w io.Writer, file string, err error) {
	var es pipeline.Errors
	if errors.As(err, &es) {
		for _, e := range es {
			fmt.Fprintln(w, e)
		}
		return
	}
	fmt.Fprintf(w, "%s: %v\n", file, err)
}
