package prometheus_test

import (
	"os"
	"strings"
	"testing"
)

// TestEveryMetricDocumented checks that every metric the package
// registers (New, NewStateCollector, NewTransportEvents) is listed in the
// package doc and in docs/observability.md, and that the package doc lists
// no metric the package lacks.
func TestEveryMetricDocumented(t *testing.T) {
	registered := map[string]bool{}
	for name := range adapterSchema(t) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			name = strings.TrimSuffix(name, suffix)
		}
		registered[name] = true
	}
	if len(registered) < 40 {
		t.Fatalf("%d metrics gathered, want every one the package registers", len(registered))
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

// TestQueriesChecked checks that every query in the promql block of
// docs/observability.md is one that testdata/queries.yml evaluates with
// promtool (TestPromtool runs it), and one the PromQL checker accepts.
func TestQueriesChecked(t *testing.T) {
	s := adapterSchema(t)
	userDoc := readFile(t, "../../docs/observability.md")
	_, block, ok := strings.Cut(userDoc, "```promql\n")
	if !ok {
		t.Fatal("docs/observability.md has no promql block")
	}
	block, _, _ = strings.Cut(block, "```")
	checked := strings.Join(strings.Fields(readFile(t, "testdata/queries.yml")), " ")
	var query []string
	n := 0
	flush := func() {
		q := strings.Join(query, " ")
		if q == "" {
			return
		}
		n++
		if !strings.Contains(checked, q) {
			t.Errorf("query %q is not in testdata/queries.yml", q)
		}
		if _, errs := s.check(q); len(errs) > 0 {
			t.Errorf("query %q: %v", q, errs)
		}
		query = query[:0]
	}
	// A query starts at the margin and continues on indented lines.
	for _, line := range strings.Split(block, "\n") {
		if !strings.HasPrefix(line, " ") {
			flush()
			if strings.HasPrefix(line, "#") {
				continue
			}
		}
		query = append(query, strings.Fields(line)...)
	}
	flush()
	if n == 0 {
		t.Error("the promql block holds no query")
	}
}
