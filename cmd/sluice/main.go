// Command sluice is the Sluice command line: run `sluice --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/ontopix/sluice/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.OSEnv())
	stop()
	os.Exit(code)
}
