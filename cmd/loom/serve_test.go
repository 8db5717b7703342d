package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomlm/loom/internal/fixtures"
)

// startServe runs `loom serve args…` in this process and returns its URL and a channel with
// its result.
func startServe(t *testing.T, args ...string) (string, chan error) {
	t.Helper()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := runServe(append([]string{"--addr", "127.0.0.1:0"}, args...), io.Discard, pw)
		pw.Close()
		done <- err
	}()
	urlRE := regexp.MustCompile(`url=(http://\S+)`)
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if m := urlRE.FindStringSubmatch(sc.Text()); m != nil {
			go io.Copy(io.Discard, pr)
			return m[1], done
		}
	}
	t.Fatalf("loom serve exited before listening: %v", <-done)
	return "", nil
}

// TestServeDefaultsAndDrain starts loom serve with no arguments, checks that it serves the
// example pipelines, then sends SIGTERM during a streaming generation and checks that the
// generation runs to its end, that new connections are refused and that serve returns.
func TestServeDefaultsAndDrain(t *testing.T) {
	url, done := startServe(t)
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, name := range []string{"beam", "creative", "default", "dry-xtc", "greedy", "penalties", "prompt-lookup", "speculative"} {
		if !strings.Contains(string(body), `"id":"`+name+`"`) {
			t.Errorf("/v1/models lacks %s: %s", name, body)
		}
	}

	resp, err = http.Post(url+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"greedy","prompt":"And God said","max_tokens":120,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if line, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: {") {
		t.Fatalf("first line %q, %v", line, err)
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(rd)
	if err != nil {
		t.Fatalf("stream broken by the drain: %v", err)
	}
	if !strings.Contains(string(rest), `"finish_reason":"length"`) || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Errorf("stream did not finish after SIGTERM:\n%s", rest)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not return after draining")
	}
	if _, err := http.Get(url + "/health"); err == nil {
		t.Error("the server still accepts connections after SIGTERM")
	}
}

// TestServeBadPipeline checks that a broken pipeline file stops serve with its file error.
func TestServeBadPipeline(t *testing.T) {
	err := runServe([]string{"--addr", "127.0.0.1:0", "/nonexistent/p.toml"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/p.toml") {
		t.Fatalf("err = %v, want one naming the file", err)
	}
}

// TestServeDocCommands runs the `loom serve` commands of docs/serving.md (on a free port) and
// checks that each serves the pipelines it names, then stops on SIGTERM.
func TestServeDocCommands(t *testing.T) {
	doc, err := os.ReadFile("../../docs/serving.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "loom serve") {
			continue
		}
		n++
		var args, want []string
		fields := strings.Fields(line)[2:]
		for i := 0; i < len(fields); i++ {
			switch f := fields[i]; {
			case f == "--addr":
				i++ // startServe listens on a free port
			case strings.HasSuffix(f, ".toml"):
				args = append(args, "../../"+f)
				want = append(want, strings.TrimSuffix(filepath.Base(f), ".toml"))
			default:
				args = append(args, f)
			}
		}
		if len(want) == 0 {
			want = []string{"default", "greedy", "speculative"}
		}
		url, done := startServe(t, args...)
		resp, err := http.Get(url + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, name := range want {
			if !strings.Contains(string(body), `"id":"`+name+`"`) {
				t.Errorf("%s: /v1/models lacks %s: %s", line, name, body)
			}
		}
		if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Errorf("%s: %v", line, err)
		}
	}
	if n == 0 {
		t.Error("no loom serve command in docs/serving.md")
	}
}

// TestServeModelFlag serves a pipeline on the embedded model's GGUF file given with --model
// and checks that it answers exactly what the embedded model answers.
func TestServeModelFlag(t *testing.T) {
	ask := func(url string) string {
		resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"model":"greedy","prompt":"And God said","max_tokens":12}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		var out struct{ Choices []struct{ Text string } }
		if err := json.Unmarshal(b, &out); err != nil || len(out.Choices) != 1 {
			t.Fatalf("%s: %v", b, err)
		}
		return out.Choices[0].Text
	}
	var texts []string
	for _, args := range [][]string{{"../../pipelines/greedy.toml"}, {"--model", "../../models/default.gguf", "../../pipelines/greedy.toml"},
		{"--no-mmap", "--model", "../../models/default.gguf", "../../pipelines/greedy.toml"}} {
		url, done := startServe(t, args...)
		texts = append(texts, ask(url))
		if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if texts[0] != texts[1] || texts[0] != texts[2] || texts[0] == "" {
		t.Errorf("embedded model %q, --model default.gguf %q, with --no-mmap %q", texts[0], texts[1], texts[2])
	}
	err := runServe([]string{"--addr", "127.0.0.1:0", "--model", "/nonexistent/m.gguf"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--model") {
		t.Errorf("missing --model file: err = %v, want one naming --model", err)
	}
}

// TestServeDrainDelay checks that during --drain-delay after SIGTERM the server still answers,
// with /ready at 503, and that it stops afterwards.
func TestServeDrainDelay(t *testing.T) {
	url, done := startServe(t, "--drain-delay", "2s", "../../pipelines/greedy.toml")
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Second)
	code := 0
	for time.Now().Before(deadline) {
		resp, err := http.Get(url + "/ready")
		if err != nil {
			t.Fatalf("refused during the drain delay: %v", err)
		}
		resp.Body.Close()
		if code = resp.StatusCode; code == http.StatusServiceUnavailable {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code != http.StatusServiceUnavailable {
		t.Errorf("/ready during the drain delay: %d, want 503", code)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestServeModelFlagExamples serves the example pipelines on a model whose vocabulary is not
// the embedded draft's: the speculative examples, which pair it with that draft, are left out
// and the others served. A --model file on which no example loads is an error.
func TestServeModelFlagExamples(t *testing.T) {
	dir := t.TempDir()
	file := fixtures.Path(t, "qwen3", "tinyqwen3-f32.gguf") // a vocabulary of 272 tokens
	url, done := startServe(t, "--model", file)
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Data []struct{ ID string } }
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	if !slices.Contains(ids, "greedy") || !slices.Contains(ids, "default") || slices.Contains(ids, "speculative") || slices.Contains(ids, "speculative-greedy") {
		t.Errorf("served %v: want the examples without the speculative ones", ids)
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	notGGUF := filepath.Join(dir, "notes.gguf")
	if err := os.WriteFile(notGGUF, []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = runServe([]string{"--addr", "127.0.0.1:0", "--model", notGGUF}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "notes.gguf") {
		t.Errorf("--model of a file that is not GGUF: err = %v, want one naming the file", err)
	}
}
