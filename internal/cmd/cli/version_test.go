package cli

import (
	"runtime/debug"
	"testing"

	"github.com/ontopix/sluice/internal/cmd/clikit"
)

// TestVersionFlag: `sluice --version` prints the same first line as
// `sluice version` (the module version from the build information).
func TestVersionFlag(t *testing.T) {
	out, errs, code := run(t, nil, "--version")
	if want := "sluice v1.2.3 (abc123)\n"; code != 0 || out != want {
		t.Fatalf("sluice --version: exit %d, stdout %q, stderr %q; want exit 0, %q", code, out, errs, want)
	}
}

// TestReadVersion covers the build information of the ways a binary is
// built: go install of a release, go build in a clone (VCS stamp, maybe
// modified), and a build without any information.
func TestReadVersion(t *testing.T) {
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want clikit.VersionInfo
	}{
		{"go install @version", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/ontopix/sluice", Version: "v0.3.0"}},
			clikit.VersionInfo{Version: "v0.3.0", Module: "github.com/ontopix/sluice", Go: "go1.26.0"}},
		{"clone, modified", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/ontopix/sluice", Version: "v0.3.1-0.20261123120000-abcdef012345+dirty"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abcdef0123456789"}, {Key: "vcs.modified", Value: "true"}}},
			clikit.VersionInfo{Version: "v0.3.1-0.20261123120000-abcdef012345+dirty", Module: "github.com/ontopix/sluice", Go: "go1.26.0", Revision: "abcdef0123456789", Modified: true}},
		{"no VCS stamp", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/ontopix/sluice", Version: "(devel)"}},
			clikit.VersionInfo{Version: "devel", Module: "github.com/ontopix/sluice", Go: "go1.26.0"}},
		{"no build information", nil,
			clikit.VersionInfo{Version: "devel", Module: "github.com/ontopix/sluice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := clikit.ReadVersion(func() (*debug.BuildInfo, bool) { return tc.bi, tc.bi != nil })
			got.Platform = ""
			if tc.bi == nil {
				got.Go = "" // the running toolchain's
			}
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
