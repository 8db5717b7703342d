package server_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/server"
)

// postWorkbench posts body to a workbench endpoint and returns the status and the body.
func postWorkbench(t *testing.T, url, body string) (int, string, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// TestWorkbenchValidate checks the editor's validation: errors at their line with the text
// `loom validate` prints, and a pipeline whose plugin the server does not run refused.
func TestWorkbenchValidate(t *testing.T) {
	_, hs := newServer(t, server.Options{})
	cases := []struct {
		name, pipeline string
		ok             bool
		line           int
		text           string
	}{
		{"valid", "[model]\nbuiltin = \"default\"\n[strategy]\ntype = \"greedy\"\n", true, 0, ""},
		{"range", "[model]\nbuiltin = \"default\"\n\n[[processors]]\ntype = \"top_k\"\nk = -3\n", false, 6, "request.pipeline:6: processors[0].k = -3"},
		{"unknown part", "[model]\nbuiltin = \"default\"\n[[processors]]\ntype = \"top_q\"\n", false, 4, "request.pipeline:4: processors[0].type"},
		{"bad TOML", "[model\nbuiltin = 1\n", false, 1, "request.pipeline:1: invalid TOML"},
		{"unserved model", "[model]\npath = \"nowhere.gguf\"\n", false, 0, "[model] must be a model this server already serves"},
		{"plugin not running", "[model]\nbuiltin = \"default\"\n[[plugins]]\nname = \"x\"\npath = \"x\"\nsha256 = \"00\"\n", false, 0, "plugins[0] (x): the workbench runs only plugins the server started"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, _ := json.Marshal(map[string]string{"pipeline": c.pipeline})
			status, _, body := postWorkbench(t, hs.URL+"/loom/validate", string(b))
			var got struct {
				OK     bool
				Errors []struct {
					Line int
					Text string
				}
			}
			if err := json.Unmarshal([]byte(body), &got); err != nil || status != http.StatusOK {
				t.Fatalf("status %d, body %s", status, body)
			}
			if got.OK != c.ok || (!c.ok && (len(got.Errors) == 0 || got.Errors[0].Line != c.line || !strings.Contains(got.Errors[0].Text, c.text))) {
				t.Fatalf("got %+v, want ok=%v, line %d, text containing %q", got, c.ok, c.line, c.text)
			}
		})
	}
}

// TestWorkbenchRun checks the run stream: token events with their step's trace, then the
// result, equal to the same request run directly with every detail recorded.
func TestWorkbenchRun(t *testing.T) {
	_, hs := newServer(t, server.Options{})
	resp, err := http.Post(hs.URL+"/loom/run", "application/json",
		strings.NewReader(`{"model":"default","prompt":"And God said","seed":9,"max_tokens":12,"trace":4}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var tokens int
	var res *core.Result
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var msg struct {
			Type   string
			Token  int
			Trace  *core.TraceStep
			Result *core.Result
		}
		if err := json.Unmarshal([]byte(line), &msg); err != nil {
			t.Fatal(err)
		}
		switch msg.Type {
		case "token":
			if msg.Trace == nil || int(msg.Trace.Chosen) != msg.Token || len(msg.Trace.Stages) == 0 {
				t.Fatalf("token event %s", line)
			}
			tokens++
		case "result":
			res = msg.Result
		default:
			t.Fatalf("event %s", line)
		}
	}
	if res == nil || tokens != len(res.Sequences[0].Tokens) {
		t.Fatalf("%d token events, result %+v", tokens, res)
	}
	want := direct(t, "default", "And God said", pipeline.Overrides{Trace: ptr(4)}, 9, 12)
	if !reflect.DeepEqual(res.Sequences[0].Tokens, want.Sequences[0].Tokens) || !reflect.DeepEqual(res.Sequences[0].Trace, want.Sequences[0].Trace) {
		t.Errorf("workbench run differs from the direct run")
	}
	if len(res.Lineage) == 0 || res.Lineage[0].Op != core.LineageStart {
		t.Errorf("lineage %+v", res.Lineage)
	}
}

// TestWorkbenchRunErrors checks that a run that cannot start gets an OpenAI error object with
// the field at fault.
func TestWorkbenchRunErrors(t *testing.T) {
	_, hs := newServer(t, server.Options{})
	cases := []struct{ body, want string }{
		{`{"model":"nope","prompt":"x"}`, `model \"nope\": no such pipeline`},
		{`{"model":"default"}`, "prompt: missing"},
		{`{"model":"default","prompt":"x","trace":0}`, "trace: 0 is outside [1, 20]"},
		{`{"model":"default","prompt":"x","max_tokens":5000}`, "max_tokens: 5000 is outside [0, 1024]"},
		{`{"pipeline":"[model]\nbuiltin = \"default\"\n[[processors]]\ntype = \"top_p\"\np = 2\n","prompt":"x"}`, "request.pipeline:5: processors[0].p = 2"},
		{`{"model":"default","prompt":"x","colour":1}`, "colour: unknown field"},
	}
	for _, c := range cases {
		status, ct, body := postWorkbench(t, hs.URL+"/loom/run", c.body)
		if status != http.StatusNotFound && status != http.StatusBadRequest || !strings.HasPrefix(ct, "application/json") || !strings.Contains(body, c.want) {
			t.Errorf("%s: status %d (%s) %s; want an error containing %q", c.body, status, ct, body, c.want)
		}
	}
}

// TestWorkbenchPage checks that the page and its files are served from the binary.
func TestWorkbenchPage(t *testing.T) {
	_, hs := newServer(t, server.Options{})
	for path, want := range map[string]string{"/": "<title>loom workbench</title>", "/workbench/app.js": "class RunView", "/workbench/style.css": ".tok"} {
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %d, lacks %q", path, resp.StatusCode, want)
		}
	}
	resp, err := http.Get(hs.URL + "/loom/parts")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var parts map[string][]struct {
		Type   string
		Params []struct {
			Name     string
			Required bool
			Default  any
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&parts); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range parts["processors"] {
		if p.Type == "top_p" {
			found = len(p.Params) > 0 && p.Params[0].Name == "p" && !p.Params[0].Required
		}
	}
	if !found || len(parts["stopping"]) == 0 || len(parts["strategies"]) == 0 {
		t.Errorf("parts %+v", parts)
	}
}

// TestWorkbenchDocCommands runs the curl commands of docs/workbench.md against a server with
// the example pipelines.
func TestWorkbenchDocCommands(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "workbench.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, hs := newServer(t, server.Options{})
	n := 0
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "curl ") {
			continue
		}
		m := curlRE.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("docs/workbench.md: a curl command this test cannot run: %s", line)
			continue
		}
		n++
		status, _, body := postWorkbench(t, hs.URL+m[1], m[2])
		want := `"type":"result"`
		if strings.HasSuffix(m[1], "/validate") {
			want = `"line":5,"path":"processors[0].p"`
		}
		if status != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("%s\n→ %d %s\nwant 200 with %s", line, status, body, want)
		}
	}
	if n != 2 {
		t.Errorf("found %d curl commands in docs/workbench.md, want 2", n)
	}
}

// TestWorkbenchDraftModel: a workbench pipeline may use a served draft model (the build gets
// the draft's tokenizer with it).
func TestWorkbenchDraftModel(t *testing.T) {
	s, hs := newServer(t, server.Options{})
	if err := s.Load(examplePath("speculative")); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]string{"pipeline": "[model]\nbuiltin = \"default\"\n[draft_model]\nbuiltin = \"draft\"\n[strategy]\ntype = \"speculative\"\n"})
	status, _, body := postWorkbench(t, hs.URL+"/loom/validate", string(b))
	if status != http.StatusOK || !strings.Contains(body, `"ok":true`) {
		t.Errorf("%d %s", status, body)
	}
}
