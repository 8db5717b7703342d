package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// locateTestdata returns the project's reference fixtures folder, ../shared/testdata beside
// the repository root (the folder holding go.mod above the working directory).
func locateTestdata() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
	td := filepath.Join(dir, "..", "shared", "testdata")
	if _, err := os.Stat(td); err != nil {
		return "", fmt.Errorf("%s is absent (CI has it beside the repository)", td)
	}
	return td, nil
}

// sharedTestdata returns the reference fixtures folder, skipping the test where it is absent.
func sharedTestdata(t testing.TB) string {
	t.Helper()
	td, err := locateTestdata()
	if err != nil {
		t.Skipf("reference fixtures not found: %v", err)
	}
	return td
}
