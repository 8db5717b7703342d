package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/loomlm/loom/pipeline"
)

func init() {
	register(&command{
		name:    "processors",
		summary: "list the built-in processors, stopping criteria and strategies with their parameters",
		run:     runParts,
	})
}

func runParts(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("processors", "", stderr)
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	reg := pipeline.Builtins()
	for _, sec := range []struct {
		title string
		kind  pipeline.Kind
		table string
	}{
		{"Logits processors ([[processors]], in chain order)", pipeline.Processor, "processors"},
		{"Stopping criteria ([[stopping]])", pipeline.Stopping, "stopping"},
		{"Strategies ([strategy])", pipeline.Strategy, "strategy"},
	} {
		fmt.Fprintf(stdout, "%s\n\n", sec.title)
		for _, p := range reg.Parts(sec.kind) {
			fmt.Fprintf(stdout, "  %s\n      %s\n", p.Type, p.Doc)
			tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
			for _, prm := range p.Params {
				def := "required"
				if prm.Default != nil {
					def = "default " + formatDefault(prm.Default)
				}
				fmt.Fprintf(tw, "      %s\t%s\t%s (%s)\n", prm.Name, prm.Type, prm.Doc, def)
			}
			tw.Flush()
			fmt.Fprintln(stdout)
		}
	}
	return nil
}

func formatDefault(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("%q", x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = formatDefault(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(v)
}
