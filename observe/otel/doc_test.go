package otel_test

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestEveryInstrumentDocumented checks that every instrument the adapter
// creates is listed in the package doc and in docs/observability.md, and
// that the package doc lists no instrument the adapter lacks.
func TestEveryInstrumentDocumented(t *testing.T) {
	h := newHarness(t)
	feed(context.Background(), h.obs)
	created := map[string]bool{}
	for point := range h.points(t) {
		created[point[:strings.IndexByte(point, '{')]] = true
	}
	pkgDoc := readFile(t, "otel.go")
	userDoc := readFile(t, "../../docs/observability.md")
	for name := range created {
		if !strings.Contains(pkgDoc, "//\t"+name+" ") {
			t.Errorf("%s is not in the package doc's table", name)
		}
		if !strings.Contains(userDoc, "`"+name+"`") {
			t.Errorf("%s is not in docs/observability.md", name)
		}
	}
	for _, line := range strings.Split(pkgDoc, "\n") {
		if name, ok := strings.CutPrefix(line, "//\tsluice."); ok {
			if name = "sluice." + strings.Fields(name)[0]; !created[name] {
				t.Errorf("the package doc lists %s, which the adapter does not create", name)
			}
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
