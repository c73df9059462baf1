// Command sluice-demo shows Sluice at work: simulated workers share
// OpenAI and ElevenLabs limits on the in-memory store, and the log of
// every grant is checked against the limits. It links only the memory
// store, so a first `go run ./cmd/sluice-demo` builds in seconds. Run
// `sluice-demo --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/internal/cmd/demo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := demo.Main(ctx, os.Args[1:], clikit.OSEnv())
	stop()
	os.Exit(code)
}
