// Command testreport reads the output of `go test -json` and prints what `go test` prints
// without -v — a line per package, and the output of every test that failed (or was running
// when its package crashed) — then lists the tests that were skipped, with their reasons. It
// exits with status 1 when a test or a build failed, or when a test skipped for a reason that
// no -allow-skip expression matches: loom's tests run from the repository alone, so a skip is
// a failure unless it is known to depend on the machine (scripts/test.sh lists those).
//
//	go test -json ./... | go run ./scripts/testreport -allow-skip 'no assembly kernels'
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json), or of the build output it interleaves.
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Output     string
}

// skip is a skipped test and the reason it logged.
type skip struct {
	name, reason string
	allowed      bool
}

// allowList is the repeated -allow-skip flag.
type allowList []*regexp.Regexp

func (a *allowList) String() string { return fmt.Sprint(*a) }

func (a *allowList) Set(s string) error {
	re, err := regexp.Compile(s)
	if err != nil {
		return err
	}
	*a = append(*a, re)
	return nil
}

func main() {
	var allow allowList
	flag.Var(&allow, "allow-skip", "a regular expression of skip reasons that do not fail the run (repeatable)")
	flag.Parse()
	if !report(os.Stdin, os.Stdout, allow) {
		os.Exit(1)
	}
}

// report prints the summary of the events read from r and reports whether the run passed.
func report(r io.Reader, w io.Writer, allow allowList) bool {
	outputs := map[string][]string{} // package + " " + test → its output lines
	var skips []skip
	failed := false
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Text()
		var e event
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil {
			fmt.Fprintln(w, line) // not an event: go's own messages (build errors of old versions)
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "build-output":
			fmt.Fprint(w, e.Output)
		case "build-fail":
			failed = true
		case "output":
			if e.Test == "" && isSummary(e.Output) {
				fmt.Fprint(w, e.Output)
				continue
			}
			outputs[key] = append(outputs[key], e.Output)
		case "fail":
			failed = true
			for _, l := range outputs[key] {
				fmt.Fprint(w, l)
			}
			delete(outputs, key)
			if e.Test == "" {
				// The package failed: the tests of it that never ended are where it crashed (a
				// panic on another goroutine ends the binary before the running test does).
				for k, lines := range outputs {
					if strings.HasPrefix(k, e.Package+" ") {
						for _, l := range lines {
							fmt.Fprint(w, l)
						}
						delete(outputs, k)
					}
				}
			}
		case "skip":
			if e.Test != "" {
				s := skip{name: e.Package + "." + e.Test, reason: skipReason(outputs[key])}
				for _, re := range allow {
					s.allowed = s.allowed || re.MatchString(s.reason)
				}
				skips = append(skips, s)
			}
			delete(outputs, key)
		case "pass":
			delete(outputs, key)
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(w, "testreport: reading go test -json: %v\n", err)
		return false
	}
	unexpected := 0
	if len(skips) > 0 {
		fmt.Fprintf(w, "\n%d skipped:\n", len(skips))
		for _, s := range skips {
			mark := "allowed"
			if !s.allowed {
				mark = "NOT ALLOWED"
				unexpected++
			}
			fmt.Fprintf(w, "  %-11s %s: %s\n", mark, s.name, s.reason)
		}
	}
	if unexpected > 0 {
		fmt.Fprintf(w, "FAIL: %d tests skipped for reasons not known to depend on the machine; every test must run from the repository alone\n", unexpected)
	}
	return !failed && unexpected == 0
}

// isSummary reports whether a package-level output line is one `go test` prints without -v.
func isSummary(line string) bool {
	for _, p := range []string{"ok  \t", "FAIL\t", "?   \t", "--- FAIL", "panic:", "FAIL\n"} {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

// skipReason returns what a skipped test logged: its output without the RUN and SKIP lines.
func skipReason(lines []string) string {
	var parts []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		parts = append(parts, t)
	}
	if len(parts) == 0 {
		return "(no reason given)"
	}
	return strings.Join(parts, " ")
}
