// Command regexstop is an example loom plugin: a stopping criterion that ends a sequence when
// its generated text matches a regular expression. Unless include is set, the match and what
// follows it are cut from the returned text.
//
// Config ([plugins.config]):
//
//	pattern   = '\bsaith\b' # required: a Go (RE2) regular expression
//	include   = false       # keep the matched text in the output
//	hold_back = 16          # bytes of streamed text held back while a match may be forming
//
// Build it with `go build -o bin/plugins/regexstop ./examples/plugins/regexstop`.
package main

import (
	"fmt"
	"regexp"

	"github.com/loomlm/loom/sdk"
)

// RegexStop stops on the first match of its pattern.
type RegexStop struct {
	re       *regexp.Regexp
	include  bool
	holdBack int
}

func (r *RegexStop) Name() string  { return "regex" }
func (r *RegexStop) Doc() string   { return "Stops when the generated text matches config pattern." }
func (r *RegexStop) HoldBack() int { return r.holdBack }

// Configure compiles the pattern; a bad one is reported on its pipeline line.
func (r *RegexStop) Configure(cfg *sdk.Config) error {
	pattern := cfg.String("pattern", "")
	r.include = cfg.Bool("include", false)
	r.holdBack = cfg.Int("hold_back", 16)
	if r.holdBack < 0 {
		cfg.Errorf("hold_back", "= %d: must not be negative", r.holdBack)
	}
	if pattern == "" {
		cfg.Errorf("pattern", "missing: give a regular expression")
		return nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		cfg.Errorf("pattern", "= %q: %v", pattern, err)
		return nil
	}
	r.re = re
	return nil
}

// Check looks for the pattern in the text generated so far.
func (r *RegexStop) Check(seq *sdk.Sequence) sdk.Stop {
	loc := r.re.FindIndex(seq.Text())
	if loc == nil {
		return sdk.Stop{}
	}
	return sdk.Stop{
		Reason:  "stop_regex",
		Detail:  fmt.Sprintf("matched %q", seq.Text()[loc[0]:loc[1]]),
		CutText: !r.include,
		TextEnd: loc[0],
	}
}

func main() { sdk.ServeStopping(&RegexStop{}) }
