package cli

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice/internal/cmd/clikit"
)

// VersionInfo is what `sluice version` reports.
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

// readVersion extracts VersionInfo from build information.
func readVersion(read func() (*debug.BuildInfo, bool)) VersionInfo {
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

// short is the version and, when stamped, the VCS revision: "v0.3.0",
// "devel (abc123, modified)".
func (v VersionInfo) short() string {
	if v.Revision == "" {
		return v.Version
	}
	s := v.Version + " (" + v.Revision
	if v.Modified {
		s += ", modified"
	}
	return s + ")"
}

func newVersionCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the sluice version and the Go toolchain it was built with",
		Example: `  sluice version
  sluice version --output json`,
		Args: clikit.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := clikit.OutputFlag(output); err != nil {
				return err
			}
			v := readVersion(g.Env.BuildInfo)
			w := cmd.OutOrStdout()
			if output == "json" {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(v)
			}
			_, err := fmt.Fprintf(w, "sluice %s\nmodule   %s\ngo       %s\nplatform %s\n", v.short(), v.Module, v.Go, v.Platform)
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}
