//go:build !unix

package console

import "time"

// cpuTime is unknown here: the benchmark reports 0.
func cpuTime() time.Duration { return 0 }
