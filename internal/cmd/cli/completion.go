package cli

import (
	"github.com/spf13/cobra"
)

func newCompletionCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh",
		Short: "Print a shell completion script",
		Long: `completion prints a completion script for bash or zsh.

bash: source <(sluice completion bash), or save it to
/etc/bash_completion.d/sluice.
zsh: sluice completion zsh > "${fpath[1]}/_sluice", then start a new shell.`,
		Example:   "  source <(sluice completion bash)\n  sluice completion zsh > \"${fpath[1]}/_sluice\"",
		ValidArgs: []string{"bash", "zsh"},
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 || (args[0] != "bash" && args[0] != "zsh") {
				return usagef("%s takes one argument, bash or zsh", cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == "bash" {
				return root.GenBashCompletionV2(cmd.OutOrStdout(), true)
			}
			return root.GenZshCompletion(cmd.OutOrStdout())
		},
	}
}
