package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestConstraintFlags: --json-schema, --regex and --grammar hold the output to their
// constraint on any pipeline, and their errors name the flag.
func TestConstraintFlags(t *testing.T) {
	dir := t.TempDir()
	schema := filepath.Join(dir, "answer.json")
	os.WriteFile(schema, []byte(`{"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}, "confidence": {"type": "integer", "minimum": 0, "maximum": 100}}, "required": ["answer", "confidence"], "additionalProperties": false}`), 0o644)
	gbnf := filepath.Join(dir, "list.gbnf")
	os.WriteFile(gbnf, []byte("root ::= item (\", \" item){0,2}\nitem ::= \"red\" | \"green\" | \"blue\"\n"), 0o644)
	date := regexp.MustCompile(`^[0-9]{4}-(0[1-9]|1[0-2])-[0-3][0-9]$`)
	list := regexp.MustCompile(`^(red|green|blue)(, (red|green|blue)){0,2}$`)
	for seed := 1; seed <= 5; seed++ {
		s := strings.TrimSpace(string(rune('0' + seed)))
		r := runJSON(t, "run", "--prompt", "Is the sea wet?", "--seed", s, "--json-schema", schema, "../../pipelines/creative.toml")
		var v struct {
			Answer     string `json:"answer"`
			Confidence *int   `json:"confidence"`
		}
		text := r.Sequences[0].Text
		if err := json.Unmarshal([]byte(text), &v); err != nil || (v.Answer != "yes" && v.Answer != "no") || v.Confidence == nil || *v.Confidence > 100 {
			t.Errorf("--json-schema seed %s: %q", s, text)
		}
		if text := runJSON(t, "run", "--prompt", "The date:", "--seed", s, "--regex", `[0-9]{4}-(0[1-9]|1[0-2])-[0-3][0-9]`).Sequences[0].Text; !date.MatchString(text) {
			t.Errorf("--regex seed %s: %q", s, text)
		}
		if text := runJSON(t, "run", "--prompt", "Colours:", "--seed", s, "--grammar", gbnf).Sequences[0].Text; !list.MatchString(text) {
			t.Errorf("--grammar seed %s: %q", s, text)
		}
	}
	// --think: a pipeline whose own regex scripts a thinking block, then frees the text; the
	// --regex constraint holds what follows the block. Without --think the two conflict.
	thinking := filepath.Join(dir, "thinking.toml")
	os.WriteFile(thinking, []byte("[model]\nbuiltin = \"default\"\n[strategy]\ntype = \"sample\"\n[[processors]]\ntype = \"regex\"\npattern = '<think>\\nHm\\.\\n</think>\\n\\n(.|\\n)*'\n"), 0o644)
	// (blank tokens between the block and the answer: at most four bytes of them, then the
	// answer's first token, which may begin with blanks of its own)
	answer := regexp.MustCompile(`^<think>\nHm\.\n</think>\n\n[ \n]{0,3}(yes|no)$`)
	for _, s := range []string{"1", "2", "3"} {
		if text := runJSON(t, "run", "--prompt", "Is the sea wet?", "--seed", s, "--regex", "yes|no", "--think", "start", thinking).Sequences[0].Text; !answer.MatchString(text) {
			t.Errorf("--think start seed %s: %q", s, text)
		}
	}
	if code, _, _ := loom(t, "run", "--prompt", "Is the sea wet?", "--seed", "1", "--regex", "yes|no", thinking); code == 0 {
		t.Error("--regex without --think under a pipeline that thinks first: succeeded")
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"type": "array", "uniqueItems": true}`), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--json-schema", filepath.Join(dir, "missing.json")}, "--json-schema"},
		{[]string{"--json-schema", bad}, `--json-schema: ` + bad + `:1:1: json schema at (root): uniqueItems true is not supported`},
		{[]string{"--regex", "[a-"}, "--regex: regex \"[a-\""},
		{[]string{"--grammar", schema}, "--grammar: " + schema},
		{[]string{"--regex", "yes|no", "--think", "later"}, `--think "later": must be none, start or open`},
		{[]string{"--think", "start"}, "--think: applies to the constraint --json-schema, --regex or --grammar adds"},
	} {
		code, _, stderr := loom(t, append([]string{"run", "--prompt", "x"}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", c.args, code, stderr, c.want)
		}
	}
}
