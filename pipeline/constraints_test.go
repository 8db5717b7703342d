package pipeline_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/loomlm/loom/constraint"
	"github.com/loomlm/loom/constraint/grammar"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
)

// buildFile writes a pipeline file (and extra files) into a temporary directory and builds it.
func buildFile(t *testing.T, src string, files map[string]string) (*pipeline.Built, error) {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "constrained.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := pipeline.Load(path)
	if err != nil {
		return nil, err
	}
	b, err := pipeline.Build(spec, pipeline.Options{})
	if err == nil {
		t.Cleanup(func() { b.Close() })
	}
	return b, err
}

func TestConstraintProcessorsGenerate(t *testing.T) {
	const head = "[model]\nbuiltin = \"default\"\n[strategy]\ntype = \"sample\"\n[[processors]]\n"
	tests := []struct {
		name  string
		src   string
		files map[string]string
		valid func(string) bool
	}{
		{
			name: "inline grammar",
			src:  head + "type = \"grammar\"\ngrammar = '''\nroot ::= \"yes\" | \"no\" | number\nnumber ::= [1-9] [0-9]{0,2}\n'''\n",
			valid: func(s string) bool {
				if s == "yes" || s == "no" {
					return true
				}
				return len(s) >= 1 && len(s) <= 3 && s[0] >= '1' && s[0] <= '9' && strings.Trim(s, "0123456789") == ""
			},
		},
		{
			name:  "grammar file relative to the pipeline",
			src:   head + "type = \"grammar\"\ngrammar_file = \"answer.gbnf\"\n",
			files: map[string]string{"answer.gbnf": "# an answer\nroot ::= \"The answer is \" (\"light\" | \"darkness\") \".\"\n"},
			valid: func(s string) bool { return s == "The answer is light." || s == "The answer is darkness." },
		},
		{
			name:  "regex",
			src:   head + "type = \"regex\"\npattern = '(Moses|Aaron) (spake|said) [a-z]{1,8}\\.'\n",
			valid: regexp.MustCompile(`^(Moses|Aaron) (spake|said) [a-z]{1,8}\.$`).MatchString,
		},
		{
			name:  "choice",
			src:   head + "type = \"choice\"\nchoices = [\"Moses\", \"Aaron\", \"Pharaoh\"]\n",
			valid: func(s string) bool { return s == "Moses" || s == "Aaron" || s == "Pharaoh" },
		},
		{
			name:  "tool_calls from a file, Llama 3's format",
			src:   head + "type = \"tool_calls\"\ntools_file = \"tools.json\"\nformat = \"llama3\"\n",
			files: map[string]string{"tools.json": `[{"type": "function", "function": {"name": "smite", "parameters": {"type": "object", "properties": {"who": {"enum": ["Moses", "Aaron"]}}, "required": ["who"], "additionalProperties": false}}}]`},
			valid: func(s string) bool {
				var call struct {
					Name       string
					Parameters struct{ Who string }
				}
				return json.Unmarshal([]byte(s), &call) == nil && strings.HasPrefix(s, `{"name": "smite", "parameters": {`) &&
					call.Name == "smite" && (call.Parameters.Who == "Moses" || call.Parameters.Who == "Aaron")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := buildFile(t, tt.src, tt.files)
			if err != nil {
				t.Fatal(err)
			}
			for seed := range uint64(3) {
				req := b.Request("And the LORD said unto")
				req.MaxNewTokens = 60
				req.Seed = core.SeedOf(seed)
				res, err := core.Generate(context.Background(), b.Pipeline, req)
				if err != nil {
					t.Fatal(err)
				}
				s := res.Sequences[0]
				if s.FinishReason != core.FinishEOS || !tt.valid(s.Text) {
					t.Fatalf("seed %d: %q (finish %q) is not a complete output of the constraint", seed, s.Text, s.FinishReason)
				}
			}
		})
	}
}

func TestConstraintProcessorErrors(t *testing.T) {
	const head = "[model]\nbuiltin = \"default\"\n[strategy]\ntype = \"sample\"\n[[processors]]\n"
	tests := []struct {
		name  string
		src   string
		files map[string]string
		want  string
	}{
		{"undefined rule inline", head + "type = \"grammar\"\ngrammar = 'root ::= \"a\" b'\n",
			nil, `constrained.toml:7:25: processors[0].grammar: rule "b" is not defined`},
		{"error in a multi-line inline grammar", head + "type = \"grammar\"\ngrammar = '''\nroot ::= item+\n\nitem ::= [a-z\n'''\n",
			nil, "constrained.toml:10:14: processors[0].grammar: character class opened at 3:10 is not closed"},
		{"error on an inline grammar's first line", head + "type = \"grammar\"\ngrammar = '''root ::= \"a\" b\n'''\n",
			nil, `constrained.toml:7:27: processors[0].grammar: rule "b" is not defined`},
		{"error in an inline schema", head + "type = \"json_schema\"\nschema = '{\"type\": \"strin\"}'\n",
			nil, `constrained.toml:7:20: processors[0].schema: json schema at /type: unknown type "strin"`},
		{"error in a multi-line inline schema", head + "type = \"json_schema\"\nschema = '''\n{\n  \"properties\": {\"a\": {\"minLength\": -1}}\n}'''\n",
			nil, `constrained.toml:9:37: processors[0].schema: json schema at /properties/a/minLength: must be a non-negative integer`},
		{"error in a schema file", head + "type = \"json_schema\"\nschema_file = \"s.json\"\n",
			map[string]string{"s.json": "{\n  \"type\": \"strin\"\n}"}, `s.json:2:11: json schema at /type: unknown type "strin"`},
		{"JSON syntax in a schema file", head + "type = \"json_schema\"\nschema_file = \"s.json\"\n",
			map[string]string{"s.json": "{\n  \"type\": }"}, `s.json:2:11: json schema at (root): not valid JSON`},
		{"error in a grammar file", head + "type = \"grammar\"\ngrammar_file = \"bad.gbnf\"\n",
			map[string]string{"bad.gbnf": "root ::= item+\n\nitem ::= [a-z\n"}, "bad.gbnf:3:14: character class opened at 3:10 is not closed"},
		{"missing grammar file", head + "type = \"grammar\"\ngrammar_file = \"none.gbnf\"\n",
			nil, `constrained.toml:7: processors[0].grammar_file = "none.gbnf":`},
		{"no grammar", head + "type = \"grammar\"\n", nil, "processors[0].grammar: missing"},
		{"both", head + "type = \"grammar\"\ngrammar = 'root ::= \"a\"'\ngrammar_file = \"x.gbnf\"\n", nil, "give either grammar or grammar_file"},
		{"empty choices", head + "type = \"choice\"\nchoices = []\n", nil, "constrained.toml:7: processors[0].choices: must list at least one string"},
		{"bad regex", head + "type = \"regex\"\npattern = 'a(b'\n", nil, "constrained.toml:7: processors[0].pattern: regex \"a(b\": error parsing regexp: missing closing )"},
		{"start rule", head + "type = \"grammar\"\ngrammar = 'root ::= \"a\"'\nstart = \"main\"\n", nil, `no rule named "main"`},
		{"tools not an array", head + "type = \"tool_calls\"\ntools = '{}'\n", nil, "processors[0].tools: not a JSON array of tools"},
		{"a tool without a name", head + "type = \"tool_calls\"\ntools = '[{\"type\": \"function\", \"function\": {}}]'\n", nil, "processors[0].tools: tools[0].function.name: missing"},
		{"a tool's schema in a file", head + "type = \"tool_calls\"\ntools_file = \"t.json\"\n",
			map[string]string{"t.json": `[{"type": "function", "function": {"name": "f", "parameters": {"type": "strin"}}}]`}, `t.json: tools[0].function.parameters: json schema at /type: unknown type "strin"`},
		{"an unknown tool", head + "type = \"tool_calls\"\ntools = '[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]'\ntool = \"g\"\n", nil, `processors[0].tool = "g": "g" is not one of the tools`},
		{"an empty list", head + "type = \"tool_calls\"\ntools = '[]'\n", nil, "processors[0].tools: tools: no tools to call"},
		{"a format", head + "type = \"tool_calls\"\ntools = '[]'\nformat = \"deepseek\"\n", nil, `processors[0].format: "deepseek": the tool-call formats are hermes, llama3 and mistral`},
		{"no tools", head + "type = \"tool_calls\"\n", nil, "processors[0].tools: missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := buildFile(t, tt.src, tt.files)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestStructuredDocPipelines builds and runs every TOML block of docs/structured.md.
func TestStructuredDocPipelines(t *testing.T) {
	doc, err := os.ReadFile("../docs/structured.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(doc), "```toml\n")[1:]
	if len(blocks) == 0 {
		t.Fatal("docs/structured.md has no TOML block")
	}
	for i, blk := range blocks {
		src, _, _ := strings.Cut(blk, "```")
		b, err := buildFile(t, src, nil)
		if err != nil {
			t.Fatalf("block %d: %v", i+1, err)
		}
		req := b.Request("And God said")
		req.MaxNewTokens = 80 // a tool call's fixed text is tens of tokens of the embedded model
		req.Seed = core.SeedOf(1)
		res, err := core.Generate(context.Background(), b.Pipeline, req)
		if err != nil {
			t.Fatalf("block %d: %v", i+1, err)
		}
		if s := res.Sequences[0]; s.FinishReason != core.FinishEOS || s.Text == "" {
			t.Fatalf("block %d: %q finished by %q, want a complete output ended by eos", i+1, s.Text, s.FinishReason)
		}
	}
}

// TestConstraintGrammarsShared: two builds of a pipeline with the same schema and grammar (a
// server builds one per request) share the compiled grammars; another schema gets its own.
func TestConstraintGrammarsShared(t *testing.T) {
	const head = "[model]\nbuiltin = \"default\"\n[strategy]\ntype = \"sample\"\n"
	src := head + "[[processors]]\ntype = \"json_schema\"\nschema = '{\"type\": \"integer\"}'\n[[processors]]\ntype = \"grammar\"\ngrammar = 'root ::= [0-9]+'\n"
	grammars := func(src string) []*grammar.CFG {
		b, err := buildFile(t, src, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []*grammar.CFG
		for _, p := range b.Pipeline.Processors {
			out = append(out, p.(*constraint.Processor).Matcher().Grammar())
		}
		return out
	}
	first, second := grammars(src), grammars(src)
	if len(first) != 2 || first[0] != second[0] || first[1] != second[1] {
		t.Errorf("the same pipeline built twice: grammars %v and %v", first, second)
	}
	other := grammars(strings.Replace(src, "integer", "number", 1))
	if other[0] == first[0] || other[1] != first[1] {
		t.Error("another schema shares the first's grammar, or the same grammar does not")
	}
}
