package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/plugins"
)

func init() {
	register(&command{
		name:    "plugins",
		summary: "check the plugins a pipeline declares (check FILE.toml), or print a binary's sha256 line (hash PATH)",
		run:     runPlugins,
	})
}

func runPlugins(args []string, stdout, stderr io.Writer) error {
	usage := func() {
		fmt.Fprintln(stderr, "Usage:\n  loom plugins check PIPELINE.toml...  start every declared plugin: verify checksums and handshakes, list the parts, stop\n  loom plugins hash PATH...            print the sha256 line to paste into a [[plugins]] entry")
	}
	if len(args) == 0 {
		usage()
		return errUsage
	}
	switch args[0] {
	case "-h", "--help", "-help", "help":
		usage()
		return nil
	case "hash":
		return pluginsHash(args[1:], stdout, stderr)
	case "check":
		return pluginsCheck(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "loom plugins: unknown subcommand %q\n", args[0])
	usage()
	return errUsage
}

func pluginsHash(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("plugins hash", "PATH...", stderr)
	paths, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		fs.Usage()
		return errUsage
	}
	for _, p := range paths {
		sum, err := plugins.FileSHA256(p)
		if err != nil {
			return err
		}
		if len(paths) > 1 {
			fmt.Fprintf(stdout, "# %s\n", p)
		}
		fmt.Fprintf(stdout, "sha256 = %q\n", sum)
	}
	return nil
}

func pluginsCheck(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("plugins check", "PIPELINE.toml...", stderr)
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
		if err := checkFile(f, stdout); err != nil {
			failed = true
			printFileErrors(stderr, f, err)
		}
	}
	if failed {
		return &exitError{code: 1}
	}
	return nil
}

// checkFile starts the plugins of one pipeline file (without its model), prints what they
// serve and stops them.
func checkFile(file string, stdout io.Writer) error {
	spec, err := pipeline.Load(file)
	if err != nil {
		return err
	}
	if len(spec.Plugins) == 0 {
		fmt.Fprintf(stdout, "%s: declares no plugins\n", file)
		return nil
	}
	h, err := plugins.Start(spec, pipeline.Builtins().Clone(), pluginOptions())
	if h != nil {
		defer h.Close()
	}
	if err != nil {
		return err
	}
	for _, pl := range h.Plugins() {
		transport := "plain gRPC"
		switch {
		case pl.Doorbell():
			transport = "shared memory, doorbell"
		case pl.SharedMemory():
			transport = "shared memory, gRPC stream"
		}
		fmt.Fprintf(stdout, "%s: plugin %s: ok (%s; checksum verified, handshake done, pid %d, %s)\n", file, pl.Name(), pl.Path(), pl.PID(), transport)
		for _, part := range pl.Parts() {
			extra := ""
			if part.Needs != "" {
				extra = ", reads " + part.Needs
			}
			fmt.Fprintf(stdout, "  %-10s type = %s%s\n", part.Kind, strings.Join(quoteAll(part.Types), " or "), extra)
			if part.Doc != "" {
				fmt.Fprintf(stdout, "             %s\n", part.Doc)
			}
		}
	}
	return nil
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = fmt.Sprintf("%q", x)
	}
	return out
}
