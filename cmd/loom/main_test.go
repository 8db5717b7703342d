package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// binDir holds the programs the tests build: loom itself (for tests that send it signals)
// and plugins.
var binDir string

func TestMain(m *testing.M) {
	// The commands that run loom itself in a process of their own (bench serve runs loom
	// serve) run their os.Executable, which under test is this binary: run as loom there.
	if os.Getenv(asLoomEnv) == "1" {
		os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Setenv(asLoomEnv, "1") // for this binary's children, not for itself
	dir, err := os.MkdirTemp("", "loom-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// asLoomEnv, set to 1, makes this test binary run as loom (TestMain).
const asLoomEnv = "LOOM_TEST_BINARY_AS_LOOM"

var (
	buildMu sync.Mutex
	built   = map[string]string{}
)

// buildProgram builds the Go package pkg (a path relative to this directory) once per test
// run and returns the program's path.
func buildProgram(t *testing.T, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[pkg]; ok {
		return p
	}
	name := filepath.Base(pkg)
	if pkg == "." {
		name = "loom"
	}
	out := filepath.Join(binDir, name)
	if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, err, b)
	}
	built[pkg] = out
	return out
}
