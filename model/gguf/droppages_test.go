package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/loomlm/loom/internal/fixtures"
)

// residentKB returns the resident kilobytes of the process's mappings of path (Linux).
func residentKB(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	kb, in := 0, false
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-"): // a mapping's first line
			in = fields[len(fields)-1] == path
		case in && len(fields) == 3 && fields[0] == "Rss:":
			n, err := strconv.Atoi(fields[1])
			if err != nil {
				t.Fatal(err)
			}
			kb += n
		}
	}
	return kb
}

// TestDropPages reads every tensor of a mapped file, drops their pages, and checks that the
// mapping's resident pages went (Linux) and that the data reads back the same.
func TestDropPages(t *testing.T) {
	path, err := filepath.Abs(fixtures.Path(t, "models", "stories260K-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var copies [][]byte
	for _, ti := range f.Tensors {
		d, err := f.TensorData(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		copies = append(copies, bytes.Clone(d))
	}
	before := 0
	if runtime.GOOS == "linux" {
		before = residentKB(t, path)
	}
	for _, ti := range f.Tensors {
		d, _ := f.TensorData(ti.Name)
		if err := f.DropPages(d); err != nil {
			t.Fatal(err)
		}
	}
	if runtime.GOOS == "linux" {
		after := residentKB(t, path)
		t.Logf("resident pages of the mapping: %d KB → %d KB (file %d KB)", before, after, f.Size/1024)
		if before < int(f.Size/1024)/2 || after > before/4 {
			t.Fatalf("resident pages of the mapping: %d KB before, %d KB after dropping (file %d KB)", before, after, f.Size/1024)
		}
	}
	for i, ti := range f.Tensors {
		d, _ := f.TensorData(ti.Name)
		if !bytes.Equal(d, copies[i]) {
			t.Fatalf("tensor %s reads back changed", ti.Name)
		}
	}
	if err := f.DropPages(copies[0]); err == nil || !strings.Contains(err.Error(), "not the file's") {
		t.Fatalf("dropping bytes that are not the file's: %v", err)
	}
	r, err := Read(fixtures.Read(t, "models", "stories260K-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := r.TensorData(r.Tensors[0].Name)
	if err := r.DropPages(d); err != nil {
		t.Fatalf("a file from Read: %v", err)
	}
}
