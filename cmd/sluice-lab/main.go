// Command sluice-lab tries Sluice out and measures it: the demo, the load
// test and the vendor simulator. Run `sluice-lab --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/internal/cmd/lab"
)

// quiet drops go-redis's own log lines (dial retries): the command reports
// an unreachable store itself, in one line, with exit code 3.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func main() {
	redis.SetLogger(quiet{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := lab.Main(ctx, os.Args[1:], clikit.OSEnv())
	stop()
	os.Exit(code)
}
