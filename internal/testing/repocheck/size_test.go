package repocheck

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxFileSize is the largest file the repository tracks without listing it
// in .ci/large-files: build outputs and data dumps do not belong in the
// tree, and every module download would carry them.
const maxFileSize = 1 << 20

// TestNoLargeFiles fails on any tracked file over 1 MiB that
// .ci/large-files (one path per line, # comments) does not list as an
// expected asset.
func TestNoLargeFiles(t *testing.T) {
	root := moduleRoot(t)
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("git ls-files in %s: %v (CI must run in a git checkout)", root, err)
		}
		t.Skipf("not a git checkout (%v): nothing to check", err)
	}
	allowed := allowedLarge(t, root)
	for _, f := range bytes.Split(out, []byte{0}) {
		name := string(f)
		if name == "" || allowed[name] {
			continue
		}
		fi, err := os.Lstat(filepath.Join(root, name))
		if err != nil {
			continue // deleted in the working tree, not yet committed
		}
		if fi.Mode().IsRegular() && fi.Size() > maxFileSize {
			t.Errorf("%s is %d bytes, over the %d-byte limit for tracked files: remove it (a build output belongs in .gitignore) or list it in .ci/large-files", name, fi.Size(), maxFileSize)
		}
	}
}

func allowedLarge(t *testing.T, root string) map[string]bool {
	t.Helper()
	allowed := map[string]bool{}
	f, err := os.Open(filepath.Join(root, ".ci", "large-files"))
	if os.IsNotExist(err) {
		return allowed
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			allowed[line] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return allowed
}
