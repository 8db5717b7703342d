package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/loomlm/loom/server"
)

// TestInlinePipeline checks loom's "pipeline" request field: a pipeline given as TOML runs like
// the same file loaded, and a bad one gets the file:line errors of loom validate, naming
// request.pipeline.
func TestInlinePipeline(t *testing.T) {
	_, hs := newServer(t, server.Options{})
	post := func(body map[string]any) (int, string) {
		b, _ := json.Marshal(body)
		resp, err := http.Post(hs.URL+"/v1/completions", "application/json", strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	text := func(s string) string {
		var r struct {
			Model   string
			Choices []struct{ Text string }
		}
		if err := json.Unmarshal([]byte(s), &r); err != nil || len(r.Choices) != 1 {
			t.Fatalf("%s: %v", s, err)
		}
		return r.Model + ": " + r.Choices[0].Text
	}
	const greedy = "[model]\nbuiltin = \"default\"\n[strategy]\ntype = \"greedy\"\n"
	code, named := post(map[string]any{"model": "greedy", "prompt": "And God said", "max_tokens": 10})
	if code != 200 {
		t.Fatalf("named: %d %s", code, named)
	}
	code, inline := post(map[string]any{"model": "greedy", "pipeline": greedy, "prompt": "And God said", "max_tokens": 10})
	if code != 200 || text(inline) != text(named) {
		t.Errorf("inline greedy: %d %s; named greedy %s", code, inline, named)
	}

	for _, tc := range []struct {
		name, toml, want string
	}{
		{"bad parameter", greedy + "[[processors]]\ntype = \"top_p\"\np = 1.5\n", `request.pipeline:7: processors[0].p = 1.5: must be in [0, 1]`},
		{"bad TOML", "[model\n", `request.pipeline:1: invalid TOML`},
		{"unserved model", "[model]\nbuiltin = \"draft\"\n", `must be a model this server already serves`},
		{"model file", "[model]\npath = \"/etc/passwd\"\n", `must be a model this server already serves`},
		{"plugins", greedy + "[[plugins]]\nname = \"p\"\npath = \"/bin/true\"\nsha256 = \"00\"\n", `may not start programs`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := post(map[string]any{"pipeline": tc.toml, "prompt": "x"})
			if code != 400 || !strings.Contains(body, tc.want) {
				t.Errorf("%d %s; want 400 with %q", code, body, tc.want)
			}
		})
	}
}
