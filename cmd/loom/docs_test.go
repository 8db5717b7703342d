package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomlm/loom/pipeline"
)

// The documentation's examples are tested: every fenced block of README.md and docs/*.md is
// verified by one of the rules below, or the test fails. A block may be preceded by an HTML
// comment (invisible on the rendered page) that says how:
//
//	<!-- file: PATH -->            the block is the whole file PATH, byte for byte
//	<!-- run: compare with loom ARGS -->
//	                               (a Go program) its output equals that of `loom ARGS`
//	<!-- output of: SCRIPT -->     (an output block) what the bash SCRIPT prints
//	<!-- save as: NAME -->         the block is also written to NAME, for the shell blocks
//	                               after it on the page
//	<!-- tested by: PATH -->       a test of another package reads the page and checks the
//	                               block (a server the commands need, say): PATH must exist
//	                               and read the page
//
// Commands run in a scratch copy of the repository (a directory of links to its entries), so
// what they write goes away with it.
//
// Without a comment, by language:
//
//   - toml: a pipeline (or, without [model], a fragment of one on the test model) that loom
//     builds without error; one that declares or uses plugins is parsed only (building would
//     need the plugin binaries).
//   - console, or a plain block whose first line starts with "$ ": each "$ " line is run by
//     bash with the loom under test first on PATH, and its output must be the lines shown
//     after it.
//   - sh, or a plain block of commands: run by bash -e, with `go
//     install` writing to a temporary GOBIN that comes first on PATH; it must succeed. Three
//     commands are not run as written: `bash scripts/test.sh` (it runs this test) is checked
//     for syntax, `apt-get install P…` is checked against the packages scripts/test.sh
//     installs, and a benchmark runs one iteration once (-benchtime 1x -count 1).
//   - go: a complete program (package main), compiled inside this module (a go build
//     overlay), and with a run: comment also run.
//   - python: compiled by python3 (syntax).

// docBlock is one fenced block of a Markdown file.
type docBlock struct {
	file, lang, text, comment string
	line                      int // of the opening fence
}

func (b docBlock) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// repoRoot is the repository root, relative to this package.
const repoRoot = "../.."

func docBlocks(t *testing.T) []docBlock {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	files = append([]string{filepath.Join(repoRoot, "README.md")}, files...)
	fence := regexp.MustCompile("^```+\\s*([A-Za-z0-9_-]*)\\s*$")
	var blocks []docBlock
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, f)
		var cur *docBlock
		var body []string
		prev := ""
		for i, line := range strings.Split(string(src), "\n") {
			if cur != nil {
				if strings.TrimSpace(line) == "```" {
					cur.text = strings.Join(body, "\n") + "\n"
					blocks = append(blocks, *cur)
					cur, body = nil, nil
				} else {
					body = append(body, line)
				}
				continue
			}
			if m := fence.FindStringSubmatch(line); m != nil {
				cur = &docBlock{file: rel, lang: m[1], line: i + 1}
				if c, ok := strings.CutPrefix(prev, "<!--"); ok {
					cur.comment = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(c), "-->"))
				}
				continue
			}
			if strings.TrimSpace(line) != "" {
				prev = strings.TrimSpace(line)
			}
		}
		if cur != nil {
			t.Fatalf("%s:%d: unclosed code block", rel, cur.line)
		}
	}
	return blocks
}

func TestDocumentationExamples(t *testing.T) {
	blocks := docBlocks(t)
	if len(blocks) < 10 {
		t.Fatalf("found only %d blocks", len(blocks))
	}
	env := newDocEnv(t)
	for _, b := range blocks {
		t.Run(b.String(), func(t *testing.T) { env.check(t, b) })
	}
}

// The README opens with the command that runs the main job and the one that runs the tests.
func TestReadmeOpensWithRunAndTest(t *testing.T) {
	var first []docBlock
	for _, b := range docBlocks(t) {
		if b.file == "README.md" && len(first) < 2 {
			first = append(first, b)
		}
	}
	if len(first) != 2 || first[0].text != "go run ./cmd/loom run pipelines/default.toml --prompt \"Once upon a time\"\n" || first[1].text != "bash scripts/test.sh\n" {
		t.Fatalf("the README's first two blocks are %q", first)
	}
}

// docEnv is what the checks share: the loom under test on PATH, a GOBIN for go install.
type docEnv struct {
	root, work, bin, gobin string
	env                    []string
}

func newDocEnv(t *testing.T) *docEnv {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	e := &docEnv{root: root, work: t.TempDir(), bin: filepath.Dir(buildProgram(t, ".")), gobin: t.TempDir()}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		if en.Name() == ".git" || en.Name() == "bin" {
			continue
		}
		if err := os.Symlink(filepath.Join(root, en.Name()), filepath.Join(e.work, en.Name())); err != nil {
			t.Fatal(err)
		}
	}
	// The documented commands run as a user runs them: without the variable that makes this
	// test binary's children run as loom (a documented `go test` of this package would run
	// loom instead of its tests).
	environ := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, asLoomEnv+"=") })
	e.env = append(environ, "PATH="+e.gobin+string(os.PathListSeparator)+e.bin+string(os.PathListSeparator)+os.Getenv("PATH"), "GOBIN="+e.gobin)
	return e
}

func (e *docEnv) check(t *testing.T, b docBlock) {
	if name, ok := strings.CutPrefix(b.comment, "save as: "); ok {
		if err := os.WriteFile(filepath.Join(e.work, filepath.Base(name)), []byte(b.text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	switch {
	case strings.HasPrefix(b.comment, "tested by: "):
		path := strings.TrimPrefix(b.comment, "tested by: ")
		src, err := os.ReadFile(filepath.Join(e.root, path))
		if err != nil {
			t.Errorf("the block's test: %v", err)
		} else if !bytes.Contains(src, []byte(filepath.Base(b.file))) {
			t.Errorf("%s does not read %s", path, b.file)
		}
	case strings.HasPrefix(b.comment, "output of: "):
		script := strings.TrimPrefix(b.comment, "output of: ")
		got, err := e.bash(t, script)
		if got != b.text {
			t.Errorf("the output of %s (%v) differs from the block:\n%s", script, err, lineDiff(got, b.text))
		}
	case strings.HasPrefix(b.comment, "file: "):
		path := strings.TrimPrefix(b.comment, "file: ")
		want, err := os.ReadFile(filepath.Join(e.root, path))
		if err != nil {
			t.Fatal(err)
		}
		if b.text != string(want) {
			t.Errorf("the block differs from %s:\n%s", path, lineDiff(b.text, string(want)))
		}
		if b.lang == "toml" {
			e.checkTOML(t, b)
		}
	case b.lang == "toml":
		e.checkTOML(t, b)
	case b.lang == "console" || (b.lang == "" && strings.HasPrefix(b.text, "$ ")):
		e.checkConsole(t, b)
	case b.lang == "sh" || b.lang == "bash" || (b.lang == "" && isCommands(b.text)):
		e.checkShell(t, b)
	case b.lang == "go":
		e.checkGo(t, b)
	case b.lang == "python":
		e.checkPython(t, b)
	default:
		t.Errorf("no rule verifies this %q block (see TestDocumentationExamples):\n%s", b.lang, b.text)
	}
}

// isCommands reports whether every line of a plain block is a command loom's docs run.
func isCommands(text string) bool {
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || (f[0] != "go" && f[0] != "loom" && f[0] != "bash") {
			return false
		}
	}
	return true
}

func (e *docEnv) checkTOML(t *testing.T, b docBlock) {
	src := b.text
	fragment := !regexp.MustCompile(`(?m)^\[model\]`).MatchString(src)
	if fragment {
		src += "\n[model]\nbuiltin = \"test\"\n"
	}
	name := filepath.Join(e.root, filepath.Dir(b.file), "block.toml") // relative paths as in its doc
	spec, err := pipeline.Parse(name, []byte(src))
	if err != nil {
		t.Fatalf("does not parse (as %s):\n%v", map[bool]string{true: "a fragment on the test model", false: "a pipeline"}[fragment], err)
	}
	reg := pipeline.Builtins()
	usesPlugins := len(spec.Plugins) > 0
	parts := append(append([]pipeline.PartSpec{spec.Strategy}, spec.Processors...), spec.Stopping...)
	for i, ps := range parts {
		kind := pipeline.Processor
		switch {
		case i == 0:
			kind = pipeline.Strategy
		case i > len(spec.Processors):
			kind = pipeline.Stopping
		}
		if _, ok := reg.Lookup(kind, ps.Type); !ok {
			usesPlugins = true
		}
	}
	if usesPlugins {
		return // parsed: building needs the plugins' binaries
	}
	built, err := pipeline.Build(spec, pipeline.Options{})
	if err != nil {
		t.Fatalf("does not build:\n%v", err)
	}
	built.Close()
}

func (e *docEnv) bash(t *testing.T, script string) (string, error) {
	t.Helper()
	// A command that never ends (a server) fails the block instead of hanging the test, and
	// takes its whole process group with it.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = e.work, e.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("%q did not end within 3 minutes", script)
	}
	return string(out), err
}

func (e *docEnv) checkConsole(t *testing.T, b docBlock) {
	lines := strings.Split(strings.TrimSuffix(b.text, "\n"), "\n")
	for i := 0; i < len(lines); {
		cmd, ok := strings.CutPrefix(lines[i], "$ ")
		if !ok {
			t.Fatalf("line %q: want a command starting with \"$ \"", lines[i])
		}
		var want []string
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "$ "); i++ {
			want = append(want, lines[i])
		}
		got, _ := e.bash(t, cmd)
		if exp := strings.Join(want, "\n") + "\n"; got != exp && !(len(want) == 0 && got == "") {
			t.Errorf("$ %s\n%s", cmd, lineDiff(got, exp))
		}
	}
}

// substitute returns the script a shell block runs (see TestDocumentationExamples).
func (e *docEnv) substitute(t *testing.T, text string) string {
	testScript, err := os.ReadFile(filepath.Join(e.root, "scripts", "test.sh"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(text, "\n") {
		cmd, _, _ := strings.Cut(line, " #")
		f := strings.Fields(cmd)
		for len(f) > 0 && regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(f[0]) {
			f = f[1:] // NAME=value before the command
		}
		switch {
		case strings.TrimSpace(cmd) == "bash scripts/test.sh":
			line = "bash -n scripts/test.sh"
		case len(f) > 2 && f[0] == "apt-get" && f[1] == "install":
			for _, pkg := range f[2:] {
				if !regexp.MustCompile(`apt-get install [^\n]*\b` + regexp.QuoteMeta(pkg) + `\b`).Match(testScript) {
					t.Errorf("scripts/test.sh does not install %s", pkg)
				}
			}
			line = ""
		case len(f) > 1 && f[0] == "go" && f[1] == "test" && strings.Contains(cmd, "-bench"):
			line = regexp.MustCompile(`-benchtime\s+\S+`).ReplaceAllString(cmd, "")
			line = regexp.MustCompile(`-count\s+\S+`).ReplaceAllString(line, "")
			line += " -benchtime 1x -count 1"
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

func (e *docEnv) checkShell(t *testing.T, b docBlock) {
	script := e.substitute(t, b.text)
	out, err := e.bash(t, script)
	if err != nil {
		t.Fatalf("%v running:\n%s\noutput:\n%s", err, script, out)
	}
	for _, l := range strings.Split(b.text, "\n") {
		if strings.HasPrefix(l, "loom run") && strings.TrimSpace(out) == "" {
			t.Errorf("%q printed nothing", l)
		}
	}
}

// goProgram builds a Go block as a program of this module and returns its path.
func (e *docEnv) goProgram(t *testing.T, b docBlock) string {
	if !strings.HasPrefix(b.text, "package main\n") {
		t.Fatalf("a Go block must be a complete program (package main) so that it can be compiled:\n%s", b.text)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte(b.text), 0o644); err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(e.root, "internal", "docblock")
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(pkg, "main.go"): src}})
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "program")
	cmd := exec.Command("go", "build", "-overlay", filepath.Join(dir, "overlay.json"), "-o", exe, "./internal/docblock")
	cmd.Dir = e.root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("does not compile: %v\n%s", err, out)
	}
	return exe
}

func (e *docEnv) checkGo(t *testing.T, b docBlock) {
	exe := e.goProgram(t, b)
	args, ok := strings.CutPrefix(b.comment, "run: compare with loom ")
	if !ok {
		return
	}
	cmd := exec.Command(exe)
	cmd.Dir = e.root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the program failed: %v\n%s", err, stderr.String())
	}
	want, err := e.bash(t, "loom "+args+" 2>/dev/null")
	if err != nil {
		t.Fatalf("loom %s: %v\n%s", args, err, want)
	}
	if stdout.String() != want || want == "" {
		t.Errorf("the program's output differs from `loom %s`:\n%s", args, lineDiff(stdout.String(), want))
	}
}

func (e *docEnv) checkPython(t *testing.T, b docBlock) {
	cmd := exec.Command("python3", "-c", "import ast, sys; ast.parse(sys.stdin.read())")
	cmd.Stdin = strings.NewReader(b.text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("not valid Python: %v\n%s", err, out)
	}
}

// lineDiff shows the lines where got and want differ.
func lineDiff(got, want string) string {
	var b strings.Builder
	gs, ws := bufio.NewScanner(strings.NewReader(got)), bufio.NewScanner(strings.NewReader(want))
	for n := 1; ; n++ {
		g, w := gs.Scan(), ws.Scan()
		if !g && !w {
			break
		}
		if gs.Text() != ws.Text() || g != w {
			fmt.Fprintf(&b, "line %d:\n  got  %q\n  want %q\n", n, gs.Text(), ws.Text())
		}
	}
	return b.String()
}
