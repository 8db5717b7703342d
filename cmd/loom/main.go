// Command loom runs decoding pipelines declared in TOML, and inspects models, tokenizers and
// pipelines.
//
// Usage:
//
//	loom <command> [flags] [arguments]
//
// Run "loom help" for the list of commands and "loom <command> --help" for one.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/loomlm/loom/pipeline"
)

// command is one subcommand of loom.
type command struct {
	name    string
	summary string
	// run executes the command with its arguments (after the command name). It returns an
	// exitError to choose the exit code; other errors exit 1.
	run func(args []string, stdout, stderr io.Writer) error
}

// commands is filled by the init functions of the files of this package, one file a command.
var commands = map[string]*command{}

func register(c *command) { commands[c.name] = c }

// exitError carries an exit code chosen by a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// errUsage marks a usage error (exit 2); its message has already been printed by the flag set.
var errUsage = errors.New("usage")

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

// runMain runs loom with args and returns the process exit code.
func runMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				return exitCode(c.run([]string{"--help"}, stdout, stderr), stderr)
			}
		}
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "loom: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return exitCode(c.run(args[1:], stdout, stderr), stderr)
}

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if errors.Is(err, errUsage) {
		return 2
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(stderr, "loom:", ee.err)
		}
		return ee.code
	}
	var es pipeline.Errors
	if errors.As(err, &es) {
		// Each pipeline error names its file and line (or flag): one a line.
		for _, e := range es {
			fmt.Fprintln(stderr, e)
		}
		return 1
	}
	fmt.Fprintln(stderr, "loom:", err)
	return 1
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "loom decodes text from language models with pipelines declared in TOML.")
	fmt.Fprintln(w, "\nUsage:\n  loom <command> [flags] [arguments]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun \"loom <command> --help\" for a command's flags.")
}

// newFlagSet returns a flag set that prints its usage with the command's synopsis and returns
// errors instead of exiting.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("loom "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: loom %s %s\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args, mapping a parse failure to errUsage (the flag set has printed why).
// Flags may follow positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errUsage
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}
