package sluice

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRootImportsOnlyStdlib enforces that package sluice depends only on the
// standard library and the module's own stdlib-only packages.
func TestRootImportsOnlyStdlib(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := map[string]bool{
		"github.com/ontopix/sluice":        true,
		"github.com/ontopix/sluice/bucket": true,
		"github.com/ontopix/sluice/store":  true,
		// contract holds the request checks; it imports only bucket and
		// store.
		"github.com/ontopix/sluice/internal/contract": true,
	}
	for _, p := range strings.Fields(string(out)) {
		if !allowed[p] {
			t.Errorf("package sluice depends on %s; it may import only the standard library, bucket, store and internal/contract", p)
		}
	}
}
