package plugins

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// FileSHA256 returns the hex sha256 of a file, as a pipeline's sha256 field wants it.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// parseSHA256 checks a declared checksum.
func parseSHA256(s string) ([]byte, error) {
	s = strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "sha256:")
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != sha256.Size {
		return nil, errors.New("must be 64 hexadecimal digits (get it with `loom plugins hash PATH`)")
	}
	return b, nil
}

// resolvePath makes a declared path absolute, relative to the pipeline file's directory.
func resolvePath(path, dir string) (string, error) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	return filepath.Abs(path)
}

// checkBinary refuses what must not be executed: a missing file, a directory, a file without
// an execute bit, and a file (or a directory holding it, unless sticky) that group or others
// may write, since its checksum could then change between the check and the exec.
func checkBinary(path string) error {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: no such file (build the plugin first?)", path)
	}
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", path)
	}
	if st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s: not executable (chmod +x)", path)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s: writable by group or others (mode %v); loom refuses to run it (chmod go-w)", path, st.Mode().Perm())
	}
	dir := filepath.Dir(path)
	dst, err := os.Stat(dir)
	if err == nil && dst.Mode().Perm()&0o022 != 0 && dst.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("%s: its directory %s is writable by group or others (mode %v); loom refuses to run it", path, dir, dst.Mode().Perm())
	}
	return nil
}

// verifyChecksum compares the file's sha256 with the declared one, with an error that shows
// both.
func verifyChecksum(path string, want []byte) error {
	got, err := FileSHA256(path)
	if err != nil {
		return err
	}
	if got != hex.EncodeToString(want) {
		return fmt.Errorf("%s: sha256 is %s, the pipeline declares %s: loom runs only the binary it was told to run (rebuilt it? update sha256 with `loom plugins hash`)", path, got, hex.EncodeToString(want))
	}
	return nil
}
