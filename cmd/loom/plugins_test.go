package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomlm/loom/plugins"
)

// banwordsPipeline builds the banwords example plugin and writes a pipeline using it.
func banwordsPipeline(t *testing.T, sha string) (pipelinePath, bin string) {
	t.Helper()
	dir := t.TempDir()
	bin = filepath.Join(dir, "banwords")
	if out, err := exec.Command("go", "build", "-o", bin, "../../examples/plugins/banwords").CombinedOutput(); err != nil {
		t.Fatalf("building the example: %v\n%s", err, out)
	}
	os.Chmod(bin, 0o755)
	if sha == "" {
		var err error
		if sha, err = plugins.FileSHA256(bin); err != nil {
			t.Fatal(err)
		}
	}
	src := fmt.Sprintf(`[model]
builtin = "test"

[generation]
max_new_tokens = 30
seed = 4
ignore_eos = true

[[plugins]]
name = "no_pets"
path = "banwords"
sha256 = %q

[plugins.config]
words = ["cat", "dog"]

[[processors]]
type = "no_pets"
`, sha)
	pipelinePath = filepath.Join(dir, "p.toml")
	if err := os.WriteFile(pipelinePath, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return pipelinePath, bin
}

func TestPluginsCommands(t *testing.T) {
	p, bin := banwordsPipeline(t, "")
	sum, _ := plugins.FileSHA256(bin)

	code, out, errs := loom(t, "plugins", "hash", bin)
	if code != 0 || strings.TrimSpace(out) != fmt.Sprintf("sha256 = %q", sum) {
		t.Fatalf("hash: exit %d, %q, %q", code, out, errs)
	}
	code, out, errs = loom(t, "plugins", "check", p)
	if code != 0 || !strings.Contains(out, "plugin no_pets: ok") || !strings.Contains(out, `processor  type = "no_pets" or "no_pets.ban_words", reads history`) {
		t.Fatalf("check: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = loom(t, "run", p, "--prompt", "the cat", "--quiet")
	if code != 0 || out == "" || strings.Contains(out, "cat") || strings.Contains(out, "dog") {
		t.Fatalf("run: exit %d, %q\n%s", code, out, errs)
	}
	if code, out, _ := loom(t, "validate", p); code != 0 || strings.TrimSpace(out) != "ok" {
		t.Fatalf("validate: exit %d %q", code, out)
	}
	if code, _, _ := loom(t, "plugins"); code != 2 {
		t.Fatalf("plugins without a subcommand: exit %d", code)
	}
}

func TestPluginsBadChecksum(t *testing.T) {
	p, _ := banwordsPipeline(t, strings.Repeat("0", 64))
	for _, args := range [][]string{{"plugins", "check", p}, {"validate", p}, {"run", p, "--prompt", "x"}} {
		code, _, errs := loom(t, args...)
		if code != 1 || !strings.Contains(errs, "p.toml:12: plugins[0].sha256") || !strings.Contains(errs, "the pipeline declares 0000") {
			t.Fatalf("%v: exit %d\n%s", args, code, errs)
		}
	}
}
