package prometheus_test

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestEveryMetricDocumented checks that every metric the adapter registers
// is listed in the package doc and in docs/observability.md, and that the
// package doc lists no metric the adapter lacks.
func TestEveryMetricDocumented(t *testing.T) {
	obs, reg := newObserver(t)
	feed(context.Background(), obs)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]bool{}
	for _, mf := range mfs {
		registered[mf.GetName()] = true
	}
	pkgDoc := readFile(t, "prometheus.go")
	userDoc := readFile(t, "../../docs/observability.md")
	for name := range registered {
		if !strings.Contains(pkgDoc, "//\t"+name+" ") {
			t.Errorf("%s is not in the package doc's table", name)
		}
		if !strings.Contains(userDoc, "`"+name+"`") {
			t.Errorf("%s is not in docs/observability.md", name)
		}
	}
	for _, line := range strings.Split(pkgDoc, "\n") {
		if name, ok := strings.CutPrefix(line, "//\tsluice_"); ok {
			if name = "sluice_" + strings.Fields(name)[0]; !registered[name] {
				t.Errorf("the package doc lists %s, which the adapter does not register", name)
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
