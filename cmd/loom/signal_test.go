package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startLoom starts the built loom program with args and the environment extra.
func startLoom(t *testing.T, extra []string, args ...string) (cmd *exec.Cmd, stdout, stderr *bytes.Buffer) {
	t.Helper()
	cmd = exec.Command(buildProgram(t, "."), args...)
	cmd.Env = append(os.Environ(), extra...)
	stdout, stderr = &bytes.Buffer{}, &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, stdout, stderr
}

// waitExit waits for cmd and returns its exit code.
func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(2 * time.Minute):
		t.Fatal("loom did not exit within 2 minutes")
		return -1
	}
}

// A Ctrl-C while `loom bench --synthetic` writes its temporary model leaves nothing behind.
func TestBenchInterruptRemovesTemporaryModel(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			tmp := t.TempDir()
			cmd, _, stderr := startLoom(t, []string{"TMPDIR=" + tmp},
				"bench", "--synthetic", "rand110M", "--type", "f32", "-p", "1", "-n", "1", "-r", "1")
			deadline := time.Now().Add(time.Minute)
			for {
				files, _ := filepath.Glob(filepath.Join(tmp, "loom-bench-*", "*"))
				if len(files) > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no temporary model appeared in %s; stderr:\n%s", tmp, stderr)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code := waitExit(t, cmd); code != 130 {
				t.Errorf("exit code %d, want 130; stderr:\n%s", code, stderr)
			}
			left, err := os.ReadDir(tmp)
			if err != nil {
				t.Fatal(err)
			}
			if len(left) != 0 {
				t.Errorf("%d entries left in the temporary directory (first %s)", len(left), left[0].Name())
			}
			if !strings.Contains(stderr.String(), "interrupted") {
				t.Errorf("stderr does not say the run was interrupted:\n%s", stderr)
			}
		})
	}
}

// A Ctrl-C during a beam search prints the sequences as far as they got, under their
// headers, and exits 130.
func TestRunInterruptedBeamShowsPartialText(t *testing.T) {
	p := writeFile(t, "beam.toml", `[model]
builtin = "default"

[generation]
max_new_tokens = 100000
ignore_eos = true

[strategy]
type = "beam"
num_beams = 64
num_return_sequences = 2
`)
	// The search takes tens of seconds; the signal comes once it is under way (a loaded
	// machine gets a second, later try).
	var out string
	for _, wait := range []time.Duration{3 * time.Second, 8 * time.Second} {
		cmd, stdout, stderr := startLoom(t, nil, "run", p, "--prompt", "Once upon a time")
		time.Sleep(wait)
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if code := waitExit(t, cmd); code != 130 {
			t.Fatalf("exit code %d, want 130; stderr:\n%s", code, stderr)
		}
		if out = stdout.String(); out != "" {
			break
		}
	}
	for _, h := range []string{"--- sequence 0 (cancelled)\n", "--- sequence 1 (cancelled)\n"} {
		i := strings.Index(out, h)
		if i < 0 {
			t.Fatalf("stdout lacks %q:\n%s", h, out)
		}
		if text, _, _ := strings.Cut(out[i+len(h):], "--- sequence"); len(strings.TrimSpace(text)) == 0 {
			t.Errorf("no partial text after %q", h)
		}
	}
}

// A prompt on standard input is read no further than the bound: an endless stream is refused.
func TestRunPromptFromEndlessStdin(t *testing.T) {
	cmd := exec.Command(buildProgram(t, "."), "run", "--prompt-file", "-")
	zero, err := os.Open("/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	defer zero.Close()
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stderr = zero, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd); code != 1 || !strings.Contains(stderr.String(), "--prompt-file - (standard input): ") || !strings.Contains(stderr.String(), "cannot fit the model's context") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
}
