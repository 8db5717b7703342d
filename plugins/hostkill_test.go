package plugins_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/plugins"
)

// helperEnv makes the test binary a plugin host that starts the pipeline the variable names,
// prints its plugin's pid and waits to be killed.
const helperEnv = "LOOM_PLUGINS_TEST_HELPER_HOST"

func helperHost() int {
	var host *plugins.Host
	start := func(spec *pipeline.Spec, reg *pipeline.Registry) (io.Closer, error) {
		h, err := plugins.Start(spec, reg, plugins.Options{})
		host = h
		if h == nil {
			return nil, err
		}
		return h, err
	}
	if _, err := pipeline.LoadAndBuild(os.Getenv(helperEnv), pipeline.Options{StartPlugins: start}); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Printf("pid %d\n", host.Plugins()[0].PID())
	time.Sleep(time.Minute)
	return 0
}

// When the host itself is killed (kill -9, no chance to clean up), its plugins die with it,
// and the next host removes the socket directory it left.
func TestHostKilled(t *testing.T) {
	e := newEnv(t)
	p := failurePipeline(e, "")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+p)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "pid ") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper host said %q (%v)", line, err)
	}
	var pid int
	fmt.Sscanf(line, "pid %d", &pid)
	if syscall.Kill(pid, 0) != nil {
		t.Fatalf("plugin %d is not running", pid)
	}
	sockDirs, _ := filepath.Glob(filepath.Join(os.TempDir(), fmt.Sprintf("loom-plugins-%d-*", cmd.Process.Pid)))
	if len(sockDirs) != 1 {
		t.Fatalf("socket directories of the helper host: %v", sockDirs)
	}

	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	noPluginsLeft(t)

	b := e.mustBuild(p)
	b.Close()
	if _, err := os.Stat(sockDirs[0]); !os.IsNotExist(err) {
		t.Fatalf("the killed host's socket directory %s is still there (%v)", sockDirs[0], err)
	}
	noPluginsLeft(t)
}
