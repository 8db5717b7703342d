package plugins_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/plugins"
)

// binDir holds the test plugins, built once by TestMain.
var binDir string

// testBinaries are built from these packages.
var testBinaries = map[string]string{
	"testplugin":    "./internal/testplugin",
	"junkplugin":    "./internal/junkplugin",
	"otherprotocol": "./internal/otherprotocol",
}

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperHost())
	}
	dir, err := os.MkdirTemp("", "loom-plugins-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	if err := buildBinaries(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func buildBinaries(dir string) error {
	for name, pkg := range testBinaries {
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", out, pkg)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s: %v\n%s", pkg, err, b)
		}
		if err := os.Chmod(out, 0o755); err != nil {
			return err
		}
	}
	return nil
}

func binary(name string) string { return filepath.Join(binDir, name) }

func sum(t testing.TB, path string) string {
	t.Helper()
	s, err := plugins.FileSHA256(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// logBuffer collects the host's log.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// env is one test's plugin host setup.
type env struct {
	t    *testing.T
	dir  string
	log  *logBuffer
	opts plugins.Options
	host *plugins.Host // the last one started
}

func newEnv(t *testing.T) *env {
	e := &env{t: t, dir: t.TempDir(), log: &logBuffer{}}
	e.opts = plugins.Options{
		Logger:      hclog.New(&hclog.LoggerOptions{Name: "test", Output: e.log, Level: hclog.Debug}),
		MaxRestarts: 5,
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("host log:\n%s", e.log.String())
		}
	})
	return e
}

// pipelineFile writes a pipeline whose [[plugins]] entry runs the named test binary; body
// follows the plugin entry (its config table first, if any).
func (e *env) pipelineFile(bin, plugin, body string) string {
	e.t.Helper()
	src := fmt.Sprintf(`[model]
builtin = "test"

[generation]
max_new_tokens = 12
seed = 7
ignore_eos = true

[[plugins]]
name = %q
path = %q
sha256 = %q
%s
`, plugin, binary(bin), sum(e.t, binary(bin)), body)
	p := filepath.Join(e.dir, "pipeline.toml")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *env) build(path string) (*pipeline.Built, error) {
	start := func(spec *pipeline.Spec, reg *pipeline.Registry) (io.Closer, error) {
		h, err := plugins.Start(spec, reg, e.opts)
		if h == nil {
			return nil, err
		}
		e.host = h
		return h, err
	}
	return pipeline.LoadAndBuild(path, pipeline.Options{StartPlugins: start})
}

func (e *env) mustBuild(path string) *pipeline.Built {
	e.t.Helper()
	b, err := e.build(path)
	if err != nil {
		e.t.Fatalf("build: %v\nlog:\n%s", err, e.log.String())
	}
	e.t.Cleanup(func() { b.Close() })
	return b
}

func generate(b *pipeline.Built, prompt string, edit func(*core.Request)) (*core.Result, error) {
	req := b.Request(prompt)
	if edit != nil {
		edit(&req)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return core.Generate(ctx, b.Pipeline, req)
}

// plugin returns the first plugin of the last host started.
func (e *env) plugin() *plugins.Plugin {
	e.t.Helper()
	if e.host == nil || len(e.host.Plugins()) == 0 {
		e.t.Fatal("no plugin host")
	}
	return e.host.Plugins()[0]
}

// processesOf lists the pids of running processes whose program lies in dir.
func processesOf(dir string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || !strings.HasPrefix(exe, dir+string(filepath.Separator)) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] == "Z" {
				continue // a zombie has exited; its parent has yet to reap it
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

// noPluginsLeft fails unless no test plugin process runs (waiting up to 5s).
func noPluginsLeft(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids := processesOf(binDir)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("plugin processes still running: %v", pids)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}
