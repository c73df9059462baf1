package fleetsim

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ontopix/sluice/internal/testing/fleetcheck"
)

// keepHistory writes dim's recorded history, with the checker's report, to
// $SLUICE_ARTIFACTS/fleetsim/<test>.txt when that variable is set (CI keeps
// the folder), so that an excess found once can be read event by event:
// one line per event in the order of its Hi, marked "in" when the report's
// window counts it. It returns the file's path, or "" when nothing was
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
		fmt.Fprintf(&b, "%s %d %d %d %s %s\n", kindName(e.Kind), e.Lo, e.Hi, e.Cost, e.Lease, in)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		f.t.Logf("history not kept: %v", err)
		return ""
	}
	return path
}

// kindName names an event kind in a kept history.
func kindName(k fleetcheck.Kind) string {
	switch k {
	case fleetcheck.Grant:
		return "grant"
	case fleetcheck.Charge:
		return "charge"
	case fleetcheck.Release:
		return "release"
	case fleetcheck.Restart:
		return "restart"
	}
	return fmt.Sprintf("kind%d", k)
}
