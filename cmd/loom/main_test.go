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
