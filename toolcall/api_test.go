package toolcall_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/loomlm/loom/constraint/grammar"
	"github.com/loomlm/loom/internal/apitools"
	"github.com/loomlm/loom/toolcall"
)

// apiTools reads the 57 API-style schemas of constraint/testdata as tools, each with a call
// of its valid instance.
func apiTools(t testing.TB) (raw []json.RawMessage, calls []toolcall.Call) {
	t.Helper()
	raw, calls, err := apitools.Load("../constraint/testdata/api-schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	return raw, calls
}

// TestAPIToolsAcceptTheirInstances: with the 57 API-style schemas as tools, the grammar of
// each format accepts a call of each tool with its valid instance, and Parse reads it back.
func TestAPIToolsAcceptTheirInstances(t *testing.T) {
	raw, calls := apiTools(t)
	tools, err := toolcall.ParseTools(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []toolcall.Format{toolcall.Hermes, toolcall.Llama3, toolcall.Mistral} {
		g, err := f.Grammar(tools, "", true)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range calls {
			text := f.Write([]toolcall.Call{c})
			if !accepts(t, g, text) {
				t.Errorf("%s refuses %s", f, text)
			}
			if _, got := f.Parse(text, tools); len(got) != 1 || got[0] != c {
				t.Errorf("%s parses %q as %v", f, text, got)
			}
		}
	}
}

// BenchmarkGrammar is the cost a request with tools pays before generating: reading the
// tools, translating their schemas and compiling the grammar of their calls.
func BenchmarkGrammar(b *testing.B) {
	raw, _ := apiTools(b)
	for _, n := range []int{1, 8, 57} {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			for b.Loop() {
				tools, err := toolcall.ParseTools(raw[:n])
				if err != nil {
					b.Fatal(err)
				}
				g, err := toolcall.Hermes.Grammar(tools, "", true)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := grammar.Compile(g, "root"); err != nil {
					b.Fatal(err)
				}
			}
		})
		// what a request pays when the same tools came before (Compile's cache)
		b.Run(fmt.Sprintf("tools=%d/cached", n), func(b *testing.B) {
			for b.Loop() {
				tools, err := toolcall.ParseTools(raw[:n])
				if err != nil {
					b.Fatal(err)
				}
				if _, err := toolcall.Hermes.Compile(tools, "", true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestCompileCaches: the same tools, format and choice give the same compiled grammar; any
// difference gives another.
func TestCompileCaches(t *testing.T) {
	raw, _ := apiTools(t)
	tools, err := toolcall.ParseTools(raw[:5])
	if err != nil {
		t.Fatal(err)
	}
	a, err := toolcall.Hermes.Compile(tools, "", true)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := toolcall.Hermes.Compile(tools, "", true); b != a {
		t.Error("the same tools compiled again")
	}
	strict := append([]toolcall.Tool(nil), tools...)
	strict[2].Strict = true
	for name, other := range map[string]func() (*grammar.CFG, error){
		"another format":  func() (*grammar.CFG, error) { return toolcall.Llama3.Compile(tools, "", true) },
		"one tool":        func() (*grammar.CFG, error) { return toolcall.Hermes.Compile(tools, tools[1].Name, true) },
		"not parallel":    func() (*grammar.CFG, error) { return toolcall.Hermes.Compile(tools, "", false) },
		"fewer tools":     func() (*grammar.CFG, error) { return toolcall.Hermes.Compile(tools[:4], "", true) },
		"a strict schema": func() (*grammar.CFG, error) { return toolcall.Hermes.Compile(strict, "", true) },
	} {
		if b, err := other(); err != nil || b == a {
			t.Errorf("%s: the cached grammar (%v)", name, err)
		}
	}
}
