package plugins

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
)

// procRunner is the go-plugin runner.Runner of one plugin process. loom runs plugins itself
// rather than through go-plugin's own runner so that it can: verify the checksum just before
// exec; exec without a shell, with an allow-listed environment and the shared-memory file;
// give the process its own process group and a parent-death signal; kill the whole group; and
// read the plugin's stdout and stderr itself, so that nothing a plugin prints (junk before the
// handshake, malformed JSON log lines) can confuse or crash the host.
type procRunner struct {
	name  string // the plugin's name in the pipeline
	path  string
	args  []string
	env   []string
	extra []*os.File
	// closeAfterStart are descriptors only the plugin keeps (its ends of the doorbell).
	closeAfterStart []*os.File
	checksum        []byte
	log             hclog.Logger
	tail            *tail

	cmd       *exec.Cmd
	handshake *io.PipeReader
	exited    chan struct{}
	waitErr   error
	readers   sync.WaitGroup
}

var _ runner.Runner = (*procRunner)(nil)

func (r *procRunner) Start(context.Context) error {
	// The plugin's own descriptors are needed in the host only until the fork.
	defer func() {
		for _, f := range r.closeAfterStart {
			f.Close()
		}
	}()
	// go-plugin's SecureConfig, checked here, immediately before the exec.
	sc := &plugin.SecureConfig{Checksum: r.checksum, Hash: sha256.New()}
	ok, err := sc.Check(r.path)
	if err != nil {
		return fmt.Errorf("verifying the checksum: %w", err)
	}
	if !ok {
		return verifyChecksum(r.path, r.checksum)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return err
	}
	r.cmd = &exec.Cmd{
		Path:       r.path,
		Args:       append([]string{r.path}, r.args...),
		Env:        r.env,
		Stdin:      nil, // /dev/null: a plugin never reads the host's terminal
		Stdout:     outW,
		Stderr:     errW,
		ExtraFiles: r.extra,
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,            // its own group: no terminal signals, killed as a group
			Pdeathsig: syscall.SIGKILL, // it dies with the host, even on kill -9
		},
	}
	err = spawn(r.cmd)
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return fmt.Errorf("starting %s: %w", r.path, err)
	}
	r.exited = make(chan struct{})
	hsR, hsW := io.Pipe()
	r.handshake = hsR
	r.readers.Add(2)
	go r.readStdout(outR, hsW)
	go r.readStderr(errR)
	go func() {
		err := r.cmd.Wait()
		// The pipes end when the last holder of them exits; wait a little for the last lines.
		done := make(chan struct{})
		go func() { r.readers.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(500 * time.Millisecond):
		}
		r.waitErr = err
		close(r.exited)
	}()
	return nil
}

// readStdout passes the first line (the handshake) to go-plugin and logs anything after it.
func (r *procRunner) readStdout(out *os.File, hs *io.PipeWriter) {
	defer r.readers.Done()
	defer out.Close()
	br := bufio.NewReaderSize(out, 64<<10)
	first := true
	for {
		line, err := readLine(br)
		if len(line) > 0 || err == nil {
			if first {
				first = false
				_, _ = hs.Write(append(line, '\n'))
				hs.Close()
			} else {
				logLine(r.log, r.tail, "stdout", line)
			}
		}
		if err != nil {
			hs.Close()
			return
		}
	}
}

func (r *procRunner) readStderr(in *os.File) {
	defer r.readers.Done()
	defer in.Close()
	br := bufio.NewReaderSize(in, 64<<10)
	var st logState
	for {
		line, err := readLine(br)
		if len(line) > 0 {
			st.log(r.log, r.tail, line)
		}
		if err != nil {
			return
		}
	}
}

// maxLine caps one logged line; the rest of a longer line is dropped.
const maxLine = 16 << 10

func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, isPrefix, err := br.ReadLine()
		if len(line) < maxLine {
			line = append(line, chunk[:min(len(chunk), maxLine-len(line))]...)
		}
		if err != nil || !isPrefix {
			return line, err
		}
	}
}

func (r *procRunner) Diagnose(context.Context) string {
	msg := "a plugin's first line on standard output must be go-plugin's handshake; is " + r.path + " a loom plugin built with the sdk?"
	if t := r.tail.String(); t != "" {
		msg += "\nits standard error ended with:\n" + t
	}
	return msg
}

// tailNote is "; its standard error ended with:" and the plugin's last lines of output, or
// "" when it printed nothing. It waits a moment for the readers to drain the pipes.
func (r *procRunner) tailNote() string {
	if r.exited != nil {
		select {
		case <-r.exited:
		case <-time.After(500 * time.Millisecond):
		}
	}
	t := r.tail.String()
	if t == "" {
		return " (it printed nothing)"
	}
	return "; its output ended with:\n" + t
}

// Stdout is what go-plugin reads for the handshake: only the first line.
func (r *procRunner) Stdout() io.ReadCloser { return r.handshake }

// Stderr is empty for go-plugin: the runner reads and logs the real one itself.
func (r *procRunner) Stderr() io.ReadCloser { return io.NopCloser(strings.NewReader("")) }

func (r *procRunner) Name() string { return r.name }

func (r *procRunner) Wait(context.Context) error {
	<-r.exited
	return r.waitErr
}

// Kill kills the plugin's whole process group.
func (r *procRunner) Kill(context.Context) error {
	r.killGroup()
	return nil
}

func (r *procRunner) killGroup() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	pid := r.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = r.cmd.Process.Kill()
}

// pid returns the process id, or 0 before start.
func (r *procRunner) pid() int {
	if r.cmd == nil || r.cmd.Process == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

func (r *procRunner) ID() string { return strconv.Itoa(r.pid()) }

func (r *procRunner) PluginToHost(network, addr string) (string, string, error) {
	return network, addr, nil
}

func (r *procRunner) HostToPlugin(network, addr string) (string, string, error) {
	return network, addr, nil
}

// exitStatus says how the process ended, waiting up to d for it to end.
func (r *procRunner) exitStatus(d time.Duration) (string, bool) {
	if r.exited == nil {
		return "", false
	}
	select {
	case <-r.exited:
	case <-time.After(d):
		return "", false
	}
	if r.waitErr == nil {
		return "exited with status 0", true
	}
	var ee *exec.ExitError
	if errors.As(r.waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by signal " + ws.Signal().String(), true
		}
	}
	return r.waitErr.Error(), true
}

// Processes are started from one goroutine locked to its own OS thread, which never exits:
// a parent-death signal fires when the thread that forked the child exits, not the process,
// and Go may end threads of goroutines locked to them.
var (
	spawnOnce sync.Once
	spawnReqs chan spawnReq
)

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnReqs = make(chan spawnReq)
		go func() {
			runtime.LockOSThread()
			for req := range spawnReqs {
				req.done <- req.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawnReqs <- spawnReq{cmd: cmd, done: done}
	return <-done
}
