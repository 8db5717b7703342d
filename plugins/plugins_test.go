package plugins_test

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/plugins"
	"github.com/loomlm/loom/strategies"
	"github.com/loomlm/loom/testmodel"
)

// In-process equivalents of the test plugin's parts.

type scaleProc struct{ t float64 }

func (scaleProc) Name() string { return "scale" }
func (s scaleProc) Process(_ *core.Sequence, c *core.Candidates) error {
	inv := float32(1 / s.t)
	if d := c.Dense(); d != nil {
		for i := range d {
			d[i] *= inv
		}
		return nil
	}
	items := c.Items()
	for i := range items {
		items[i].Logit *= inv
	}
	return nil
}

type banProc struct{ ids []core.TokenID }

func (banProc) Name() string { return "ban" }
func (b banProc) Process(_ *core.Sequence, c *core.Candidates) error {
	for _, id := range b.ids {
		if d := c.Dense(); d != nil {
			d[id] += float32(negInf())
		}
	}
	return nil
}

type topProc struct{ n int }

func (topProc) Name() string { return "top" }
func (t topProc) Process(_ *core.Sequence, c *core.Candidates) error {
	c.Sort()
	items := c.Items()
	c.SetItems(items[:min(t.n, len(items))], true)
	return nil
}

func negInf() float64 { return -1 / zero }

var zero = 0.0

func sameSequences(t *testing.T, what string, got, want *core.Result) {
	t.Helper()
	if len(got.Sequences) != len(want.Sequences) {
		t.Fatalf("%s: %d sequences, want %d", what, len(got.Sequences), len(want.Sequences))
	}
	for i := range want.Sequences {
		g, w := got.Sequences[i], want.Sequences[i]
		if !reflect.DeepEqual(g.Tokens, w.Tokens) || g.Text != w.Text || !reflect.DeepEqual(g.Scores, w.Scores) || g.FinishReason != w.FinishReason {
			t.Fatalf("%s: sequence %d differs:\nplugin:   %v %q %v %s\nbuilt-in: %v %q %v %s", what, i, g.Tokens, g.Text, g.Scores, g.FinishReason, w.Tokens, w.Text, w.Scores, w.FinishReason)
		}
	}
}

// The same processors, strategy and seed give the same output in a plugin as in process, over
// shared memory and over plain gRPC, for one sequence and for batches.
func TestSameOutputAsInProcess(t *testing.T) {
	for _, transport := range []plugins.Transport{plugins.SharedMemory, plugins.SharedMemoryStream, plugins.GRPC} {
		for _, strat := range []string{"sample", "tp.greedy"} {
			name := fmt.Sprintf("transport%d/%s", transport, strat)
			t.Run(name, func(t *testing.T) {
				e := newEnv(t)
				e.opts.Transport = transport
				p := e.pipelineFile("testplugin", "tp", `[plugins.config]
t = 0.7
ban = [5, 9]

[strategy]
type = "`+strat+`"

[[processors]]
type = "tp.scale"

[[processors]]
type = "tp.ban"

[[processors]]
type = "tp.top"
`)
				b := e.mustBuild(p)
				if got := e.plugin().SharedMemory(); got != (transport != plugins.GRPC) {
					t.Fatalf("shared memory: %v", got)
				}
				if got := e.plugin().Doorbell(); got != (transport == plugins.SharedMemory) {
					t.Fatalf("doorbell: %v", got)
				}
				m, tok := testmodel.Default()
				var st core.Strategy = strategies.Ancestral{}
				if strat == "tp.greedy" {
					st = strategies.Greedy{}
				}
				ref := &core.Pipeline{Model: m, Tokenizer: tok, Strategy: st,
					Processors: []core.LogitsProcessor{scaleProc{0.7}, banProc{[]core.TokenID{5, 9}}, topProc{5}}}
				for _, n := range []int{1, 3} {
					edit := func(r *core.Request) { r.N = n; r.Return.Logprobs = true }
					got, err := generate(b, "the cat", edit)
					if err != nil {
						t.Fatal(err)
					}
					req := b.Request("the cat")
					edit(&req)
					want, err := core.Generate(t.Context(), ref, req)
					if err != nil {
						t.Fatal(err)
					}
					sameSequences(t, fmt.Sprintf("n=%d", n), got, want)
					for _, s := range got.Sequences {
						for _, id := range s.Tokens {
							if id == 5 || id == 9 {
								t.Fatalf("banned token %d generated", id)
							}
						}
					}
				}
				b.Close()
				noPluginsLeft(t)
			})
		}
	}
}

// A plugin stopping criterion ends sequences with its own reason, and sees only the
// allow-listed environment plus the pipeline's env.
func TestStoppingAndEnvironment(t *testing.T) {
	t.Setenv("LOOM_TEST_SECRET", "s3cret")
	e := newEnv(t)
	p := e.pipelineFile("testplugin", "tp", `env = { LOOM_TEST_GIVEN = "yes" }
[plugins.config]
stop_after = 4

[strategy]
type = "greedy"

[[stopping]]
type = "tp"
`)
	b := e.mustBuild(p)
	res, err := generate(b, "the", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := res.Sequences[0]
	if s.FinishReason != "enough" || len(s.Tokens) != 4 {
		t.Fatalf("finish %q after %d tokens", s.FinishReason, len(s.Tokens))
	}
	if !strings.Contains(s.FinishDetail, `secret="" given="yes"`) {
		t.Fatalf("plugin environment: %s", s.FinishDetail)
	}
}

// checks that after a failure the host serves the next request with a new process, and that
// closing leaves nothing running.
func recovers(t *testing.T, e *env, b interface {
	Close() error
}, next func() error, wantStarts int) {
	t.Helper()
	if err := next(); err != nil {
		t.Fatalf("the request after the failure: %v", err)
	}
	if got := e.plugin().Starts(); got != wantStarts {
		t.Fatalf("%d processes started, want %d", got, wantStarts)
	}
	b.Close()
	noPluginsLeft(t)
}

// failurePipeline runs the test plugin's scale processor with the given misbehaviour, once
// (the first process misbehaves, the next ones behave).
func failurePipeline(e *env, config string) string {
	return e.pipelineFile("testplugin", "tp", `timeout = "400ms"
[plugins.config]
once = "`+e.dir+`/once"
`+config+`

[strategy]
type = "greedy"

[[processors]]
type = "tp.scale"
`)
}

func TestKilledMidGeneration(t *testing.T) {
	e := newEnv(t)
	b := e.mustBuild(failurePipeline(e, ""))
	pl := e.plugin()
	killed := false
	_, err := generate(b, "the cat", func(r *core.Request) {
		r.OnEvent = func(ev core.Event) error {
			if ev.Token >= 0 && !killed {
				killed = true
				if err := syscall.Kill(pl.PID(), syscall.SIGKILL); err != nil {
					t.Error(err)
				}
			}
			return nil
		}
	})
	wantErr(t, err, `plugin "tp"`, "killed by signal")
	recovers(t, e, b, func() error { _, err := generate(b, "the cat", nil); return err }, 2)
}

func TestHangPastDeadline(t *testing.T) {
	e := newEnv(t)
	b := e.mustBuild(failurePipeline(e, `misbehave = "hang"
after = 2`))
	start := time.Now()
	_, err := generate(b, "the cat", nil)
	wantErr(t, err, `plugin "tp"`, "no answer within 400ms")
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the hung call took %v", d)
	}
	recovers(t, e, b, func() error { _, err := generate(b, "the cat", nil); return err }, 2)
}

// A panic inside a part is caught by the sdk: the call fails, the process lives on.
func TestPanicInPart(t *testing.T) {
	e := newEnv(t)
	b := e.mustBuild(failurePipeline(e, `misbehave = "panic"
after = 1`))
	_, err := generate(b, "the cat", nil)
	wantErr(t, err, `plugin "tp"`, "panic: testplugin: panicking as configured")
	recovers(t, e, b, func() error { _, err := generate(b, "the cat", nil); return err }, 1)
}

// A panic the sdk cannot catch (in another goroutine) crashes the process.
func TestCrash(t *testing.T) {
	e := newEnv(t)
	b := e.mustBuild(failurePipeline(e, `misbehave = "crash"
after = 3`))
	_, err := generate(b, "the cat", nil)
	wantErr(t, err, `plugin "tp"`, "crashed", "panic: testplugin: crashing as configured")
	recovers(t, e, b, func() error { _, err := generate(b, "the cat", nil); return err }, 2)
}

func TestMalformedAnswers(t *testing.T) {
	for _, c := range []struct{ mode, part, want string }{
		{"nan", "tp.scale", "is NaN"},
		{"bad_id", "tp.ban", "outside the vocabulary"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			e := newEnv(t)
			b := e.mustBuild(e.pipelineFile("testplugin", "tp", `[plugins.config]
once = "`+e.dir+`/once"
misbehave = "`+c.mode+`"
after = 2

[[processors]]
type = "`+c.part+`"
`))
			_, err := generate(b, "the cat", nil)
			wantErr(t, err, `plugin "tp"`, "malformed answer", c.want)
			recovers(t, e, b, func() error { _, err := generate(b, "the cat", nil); return err }, 2)
		})
	}
}

// Junk on stdout and malformed JSON on stderr are logged as text; nothing breaks.
func TestJunkOutput(t *testing.T) {
	e := newEnv(t)
	b := e.mustBuild(failurePipeline(e, `misbehave = "junk"`))
	for range 2 {
		if _, err := generate(b, "the cat", nil); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	noPluginsLeft(t)
	log := e.log.String()
	for _, want := range []string{"test.plugin.tp: 42", "[WARN]  test.plugin.tp: a proper log line: k=1", `\x1b[31mred`, "junk on stdout through fmt", "junk written to descriptor 1", "{bad json"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q", want)
		}
	}
	if strings.Contains(log, "\x1b") {
		t.Error("a terminal escape reached the log")
	}
}

func TestStartErrors(t *testing.T) {
	e := newEnv(t)
	write := func(name, entry string) string {
		p := e.dir + "/" + name + ".toml"
		src := "[model]\nbuiltin = \"test\"\n\n[[plugins]]\nname = \"x\"\n" + entry
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tp := binary("testplugin")
	writable := e.dir + "/writable"
	data, _ := os.ReadFile(tp)
	os.WriteFile(writable, data, 0o777)
	os.Chmod(writable, 0o777)
	script := func(name, src string) string {
		p := e.dir + "/" + name
		if err := os.WriteFile(p, []byte(src), 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, 0o755)
		return fmt.Sprintf("path = %q\nsha256 = %q\n", p, sum(t, p))
	}
	badImport := script("badimport.py", "#!/usr/bin/python3\nimport sys\nprint('loading the model of bans', file=sys.stderr)\nimport loom_no_such_module\n")
	badSyntax := script("badsyntax.py", "#!/usr/bin/python3\ndef serve(:\n    pass\n")
	hang := script("hang.sh", "#!/bin/sh\necho 'warming up' >&2\nexec sleep 60\n")
	cases := []struct {
		name, entry string
		want        []string
	}{
		{"python bad import", badImport, []string{`plugin "x"`, "ended before the handshake (exit status 1)", "loading the model of bans", "ModuleNotFoundError: No module named 'loom_no_such_module'"}},
		{"python syntax error", badSyntax, []string{`plugin "x"`, "ended before the handshake (exit status 1)", "SyntaxError"}},
		{"hangs before handshake", hang + "start_timeout = \"400ms\"\n", []string{`plugin "x"`, "did not complete the handshake within 400ms", "start_timeout", "warming up"}},
		{"bad start timeout", fmt.Sprintf("path = %q\nsha256 = %q\nstart_timeout = \"-1s\"\n", tp, sum(t, tp)), []string{":8: plugins[0].start_timeout", "positive duration"}},
		{"bad checksum", fmt.Sprintf("path = %q\nsha256 = %q\n", tp, strings.Repeat("ab", 32)), []string{"bad checksum.toml:7: plugins[0].sha256", "sha256 is " + sum(t, tp), "declares " + strings.Repeat("ab", 32)}},
		{"not a checksum", fmt.Sprintf("path = %q\nsha256 = \"abc\"\n", tp), []string{":7: plugins[0].sha256", "64 hexadecimal digits"}},
		{"missing binary", fmt.Sprintf("path = %q\nsha256 = %q\n", tp+"-missing", sum(t, tp)), []string{":6: plugins[0].path", "no such file"}},
		{"group writable", fmt.Sprintf("path = %q\nsha256 = %q\n", writable, sum(t, writable)), []string{"writable by group or others"}},
		{"other protocol", fmt.Sprintf("path = %q\nsha256 = %q\n", binary("otherprotocol"), sum(t, binary("otherprotocol"))), []string{"protocol version mismatch", "Plugin version: 99"}},
		{"junk before handshake", fmt.Sprintf("path = %q\nsha256 = %q\n", binary("junkplugin"), sum(t, binary("junkplugin"))), []string{"no go-plugin handshake", "hello, I print before the handshake"}},
		{"bad timeout", fmt.Sprintf("path = %q\nsha256 = %q\ntimeout = \"soon\"\n", tp, sum(t, tp)), []string{":8: plugins[0].timeout", "positive duration"}},
		{"bad config", fmt.Sprintf("path = %q\nsha256 = %q\n[plugins.config]\nt = -1\nwhat = 1\n", tp, sum(t, tp)), []string{":9: plugins[0].config.t = -1: must be positive", ":10: plugins[0].config.what: unknown key"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			b, err := e.build(write(c.name, c.entry))
			if err == nil {
				b.Close()
			}
			wantErr(t, err, c.want...)
			if d := time.Since(start); d > 8*time.Second {
				t.Errorf("took %v", d)
			}
			noPluginsLeft(t)
		})
	}
}

// The restart budget bounds how often a failing plugin is started again.
func TestRestartBudget(t *testing.T) {
	e := newEnv(t)
	e.opts.MaxRestarts = 1
	b := e.mustBuild(e.pipelineFile("testplugin", "tp", `[plugins.config]
misbehave = "exit"
after = 1

[[processors]]
type = "tp.scale"
`)) // every process exits on its second call
	_, err := generate(b, "the cat", nil)
	wantErr(t, err, "crashed", "exit status 7")
	_, err = generate(b, "the cat", nil)
	wantErr(t, err, "crashed")
	_, err = generate(b, "the cat", nil)
	wantErr(t, err, "restarted 1 times")
	b.Close()
	noPluginsLeft(t)
}

// A failing stopping plugin finishes the sequence with reason "error", naming the plugin.
func TestStoppingFailure(t *testing.T) {
	e := newEnv(t)
	b := e.mustBuild(e.pipelineFile("testplugin", "tp", `[plugins.config]
misbehave = "exit"
after = 2
once = "`+e.dir+`/once"

[[stopping]]
type = "tp"
`))
	res, err := generate(b, "the", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := res.Sequences[0]
	if s.FinishReason != core.FinishError || !strings.Contains(s.FinishDetail, `plugin "tp"`) || len(s.Tokens) != 3 {
		t.Fatalf("finish %q (%s) after %d tokens", s.FinishReason, s.FinishDetail, len(s.Tokens))
	}
	recovers(t, e, b, func() error {
		res, err := generate(b, "the", nil)
		if err == nil && res.Sequences[0].FinishReason != core.FinishLength {
			err = errors.New(res.Sequences[0].FinishDetail)
		}
		return err
	}, 2)
}

// A strategy plugin that stops calling the session is killed after its timeout; one that
// crashes fails its request; both are restarted for the next.
func TestStrategyFailures(t *testing.T) {
	for _, c := range []struct{ mode, want string }{
		{"hang", "no answer within 400ms"},
		{"crash", "crashed"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			e := newEnv(t)
			b := e.mustBuild(e.pipelineFile("testplugin", "tp", `timeout = "400ms"
[plugins.config]
once = "`+e.dir+`/once"
misbehave = "`+c.mode+`"
after = 3

[strategy]
type = "tp.greedy"
`))
			_, err := generate(b, "the cat", nil)
			wantErr(t, err, `plugin "tp"`, c.want)
			recovers(t, e, b, func() error { _, err := generate(b, "the cat", nil); return err }, 2)
		})
	}
}

// Requests running at once share a plugin by taking turns, and get what they would alone.
func TestConcurrentRequests(t *testing.T) {
	e := newEnv(t)
	b := e.mustBuild(e.pipelineFile("testplugin", "tp", `[plugins.config]
t = 0.9
ban = [4]

[[processors]]
type = "tp.scale"

[[processors]]
type = "tp.ban"
`))
	prompts := []string{"the cat", "a dog", "the sun", "she said"}
	want := make([]string, len(prompts))
	for i, p := range prompts {
		res, err := generate(b, p, func(r *core.Request) { r.N = 2 })
		if err != nil {
			t.Fatal(err)
		}
		want[i] = res.Sequences[0].Text + "|" + res.Sequences[1].Text
	}
	errs := make(chan error, len(prompts))
	for i, p := range prompts {
		go func() {
			res, err := generate(b, p, func(r *core.Request) { r.N = 2 })
			if err == nil && res.Sequences[0].Text+"|"+res.Sequences[1].Text != want[i] {
				err = fmt.Errorf("%q: concurrent output differs", p)
			}
			errs <- err
		}()
	}
	for range prompts {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
