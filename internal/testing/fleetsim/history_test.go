package fleetsim

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ontopix/sluice/internal/testing/fleetcheck"
)

// keepHistory writes dim's recorded history, with the checker's report, to
// $SLUICE_ARTIFACTS/fleetsim/<test>.txt when that variable is set (CI keeps
// the folder), so that an excess found once can be read event by event:
// one line per event in the order of its Hi, marked "in" when it is a
// grant or charge that lies inside the report's window (a charge there
// counts only against the grants valid after it). It returns the file's path, or "" when nothing was
// written.
func (f *fleet) keepHistory(dim string, r fleetcheck.Report) string {
	dir := os.Getenv("SLUICE_ARTIFACTS")
	if dir == "" {
		return ""
	}
	dir = filepath.Join(dir, "fleetsim")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.t.Logf("history not kept: %v", err)
		return ""
	}
	name := strings.NewReplacer("/", "_", " ", "_", "#", "_").Replace(f.t.Name())
	path := filepath.Join(dir, name+".txt")
	d := f.rec.Dimension(dim)
	sort.SliceStable(d.Events, func(i, j int) bool { return d.Events[i].Hi < d.Events[j].Hi })
	var b strings.Builder
	fmt.Fprintf(&b, "%v\nlimit %+v\nkind lo_ms hi_ms cost lease window\n", r, d.Limit)
	for _, e := range d.Events {
		in := ""
		if e.Lo >= r.From && e.Hi <= r.To && (e.Kind == fleetcheck.Grant || e.Kind == fleetcheck.Charge) {
			in = "in"
		}
		fmt.Fprintf(&b, "%v %d %d %d %s %s\n", e.Kind, e.Lo, e.Hi, e.Cost, e.Lease, in)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		f.t.Logf("history not kept: %v", err)
		return ""
	}
	return path
}

// keepHistory writes one line per event, in the order of their Hi, each
// marked when it lies inside the report's window.
func TestKeepHistory(t *testing.T) {
	t.Setenv("SLUICE_ARTIFACTS", t.TempDir())
	f := &fleet{t: t, kind: "memory", rec: NewRecorder()}
	f.rec.Limit("v#tpm", fleetcheck.Limit{Capacity: 10, Amount: 10, PeriodMs: 1000})
	f.rec.Add("v#tpm", fleetcheck.Event{Kind: fleetcheck.Grant, Lo: 5, Hi: 9, Cost: 4, Lease: "b"})
	f.rec.Add("v#tpm", fleetcheck.Event{Kind: fleetcheck.Grant, Lo: 0, Hi: 2, Cost: 3, Lease: "a"})
	f.rec.Add("v#tpm", fleetcheck.Event{Kind: fleetcheck.Charge, Lo: 6, Hi: 7, Cost: 2})
	path := f.keepHistory("v#tpm", fleetcheck.Report{Name: "v#tpm", From: 5, To: 9})
	if path == "" {
		t.Fatal("no history written")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	got := lines[len(lines)-3:]
	want := []string{"grant 0 2 3 a ", "charge 6 7 2  in", "grant 5 9 4 b in"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("history lines %q, want %q", got, want)
	}
}
