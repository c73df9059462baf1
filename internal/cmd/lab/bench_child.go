package lab

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice/internal/cmd/benchrun"
	"github.com/ontopix/sluice/internal/cmd/clikit"
)

// progressLine is what a bench child prints on stdout every 250 ms.
type progressLine struct {
	Granted int64 `json:"granted"`
	Denied  int64 `json:"retry_in"`
	Errors  int64 `json:"errors"`
}

// newBenchChildCmd is the hidden command bench re-runs as each child
// process: it runs the workers of --config and writes its part to --out.
func newBenchChildCmd(g *globals) *cobra.Command {
	var cfgJSON, out string
	cmd := &cobra.Command{
		Use:    "bench-child",
		Short:  "One process of sluice-lab bench (internal)",
		Hidden: true,
		Args:   clikit.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var cfg benchrun.Config
			if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
				return clikit.Usagef("--config: %v", err)
			}
			log, err := g.Logger(cmd.ErrOrStderr())
			if err != nil {
				return &clikit.UsageError{Err: err}
			}
			op, err := g.Open(cmd.Context())
			if err != nil {
				return err
			}
			defer op.Close()
			var live benchrun.Counters
			c, err := g.Client(live.Wrap(op.Store), log)
			if err != nil {
				return err
			}
			done := make(chan struct{})
			var wg sync.WaitGroup
			w := cmd.OutOrStdout()
			wg.Go(func() {
				t := time.NewTicker(250 * time.Millisecond)
				defer t.Stop()
				enc := json.NewEncoder(w)
				for {
					select {
					case <-done:
						return
					case <-t.C:
						_ = enc.Encode(progressLine{live.Granted.Load(), live.Denied.Load(), live.Errors.Load()})
					}
				}
			})
			part, err := benchrun.Run(cmd.Context(), c, cfg, &live)
			close(done)
			wg.Wait()
			if err != nil {
				return err
			}
			b, err := json.Marshal(part)
			if err != nil {
				return err
			}
			if err := os.WriteFile(out, b, 0o600); err != nil {
				return fmt.Errorf("bench-child: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgJSON, "config", "", "the run's benchrun.Config as JSON")
	cmd.Flags().StringVar(&out, "out", "", "file to write the part to")
	return cmd
}
