//go:build unix

package pipeline_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomlm/loom/pipeline"
)

// TestParamFilesThatAreNotSchemas names, as a schema or grammar file, things that cannot be
// one: a device that never ends, a directory and a file too large, each a clear error at once
// (the large file's before it is read); and a named pipe, which is read as the file it
// streams.
func TestParamFilesThatAreNotSchemas(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.gbnf")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 17<<20); err != nil { // sparse: no 17 MiB written
		t.Fatal(err)
	}
	const head = "[model]\nbuiltin = \"default\"\n[strategy]\ntype = \"sample\"\n[[processors]]\n"
	for _, tt := range []struct{ name, src, want string }{
		{"a device", head + "type = \"json_schema\"\nschema_file = \"/dev/zero\"\n", `processors[0].schema_file = "/dev/zero": /dev/zero: more than the 16 MiB a schema or grammar file may have`},
		{"a directory", head + "type = \"grammar\"\ngrammar_file = \"" + dir + "\"\n", "is a directory"},
		{"too large", head + "type = \"grammar\"\ngrammar_file = \"" + big + "\"\n", "big.gbnf: 17825792 bytes, more than the 16 MiB a schema or grammar file may have"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := buildFile(t, tt.src, nil)
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("got %v, want an error containing %q", err, tt.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("still reading after 10 s")
			}
		})
	}
	go func() {
		if err := os.WriteFile(fifo, []byte(`{"type": "string", "maxLength": 3}`), 0o644); err != nil {
			t.Error(err)
		}
	}()
	b, err := buildFile(t, head+"type = \"json_schema\"\nschema_file = \""+fifo+"\"\n", nil)
	if err != nil || b == nil {
		t.Fatalf("a schema streamed through a named pipe: %v", err)
	}
}

// TestLoadBoundsItsRead loads pipeline files that cannot be: a device that never ends and a
// file larger than MaxFileBytes, each a clear error at once; a pipeline streamed through a
// named pipe loads.
func TestLoadBoundsItsRead(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.toml")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, pipeline.MaxFileBytes+1); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, want string }{
		{"/dev/zero", "/dev/zero: more than the 16 MiB a pipeline file may have"},
		{big, "big.toml: 16777217 bytes, more than the 16 MiB a pipeline file may have"},
	} {
		done := make(chan error, 1)
		go func() {
			_, err := pipeline.Load(tt.path)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.HasSuffix(err.Error(), tt.want) {
				t.Errorf("Load(%s) = %v, want an error ending %q", tt.path, err, tt.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Load(%s) still reading after 10 s", tt.path)
		}
	}
	fifo := filepath.Join(dir, "piped.toml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	go func() {
		if err := os.WriteFile(fifo, []byte("[model]\nbuiltin = \"test\"\n[strategy]\ntype = \"greedy\"\n"), 0o644); err != nil {
			t.Error(err)
		}
	}()
	spec, err := pipeline.Load(fifo)
	if err != nil || spec.Strategy.Type != "greedy" {
		t.Fatalf("a pipeline through a named pipe: %v", err)
	}
}
