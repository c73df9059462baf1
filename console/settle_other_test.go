//go:build !linux

package console

import (
	"context"
	"time"
)

// settle waits for the browser to finish starting (see the Linux version,
// which watches its processes' CPU time): here, a fixed two seconds.
func settle(context.Context) { time.Sleep(2 * time.Second) }
