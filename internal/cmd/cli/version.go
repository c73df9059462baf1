package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice/internal/cmd/clikit"
)

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
			v := clikit.ReadVersion(g.Env.BuildInfo)
			w := cmd.OutOrStdout()
			if output == "json" {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(v)
			}
			_, err := fmt.Fprintf(w, "sluice %s\nmodule   %s\ngo       %s\nplatform %s\n", v.Short(), v.Module, v.Go, v.Platform)
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}
