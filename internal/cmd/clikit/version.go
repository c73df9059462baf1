package clikit

import (
	"runtime"
	"runtime/debug"
)

// VersionInfo is what `sluice version` and the commands' --version report.
type VersionInfo struct {
	// Version is the main module's version, or "devel" for a build from a
	// working tree.
	Version string `json:"version"`
	// Module is the main module's path.
	Module string `json:"module"`
	// Go is the toolchain the binary was built with.
	Go string `json:"go"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
	// Revision and Modified come from the VCS stamp, when present.
	Revision string `json:"revision,omitempty"`
	Modified bool   `json:"modified,omitempty"`
}

// ReadVersion extracts VersionInfo from build information; a nil read
// reads the running binary's (debug.ReadBuildInfo).
func ReadVersion(read func() (*debug.BuildInfo, bool)) VersionInfo {
	v := VersionInfo{Version: "devel", Module: "github.com/ontopix/sluice", Go: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if read == nil {
		read = debug.ReadBuildInfo
	}
	bi, ok := read()
	if !ok || bi == nil {
		return v
	}
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// Short is the version and, when stamped, the VCS revision: "v0.3.0",
// "devel (abc123, modified)".
func (v VersionInfo) Short() string {
	if v.Revision == "" {
		return v.Version
	}
	s := v.Version + " (" + v.Revision
	if v.Modified {
		s += ", modified"
	}
	return s + ")"
}
