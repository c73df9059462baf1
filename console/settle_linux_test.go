package console

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
)

// settle waits until the browser of ctx is idle: its processes used no
// more than one clock tick of CPU in each of three 100 ms windows in a
// row, or 10 s passed. After it starts, Chromium loads its own UI pages
// (the omnibox popup) for one to two seconds, on the cores the page
// would use; an operator's browser has long finished.
func settle(ctx context.Context) {
	p := chromedp.FromContext(ctx).Browser.Process()
	if p == nil {
		time.Sleep(2 * time.Second)
		return
	}
	prev, ok := treeCPUTicks(p.Pid)
	quiet := 0
	for end := time.Now().Add(10 * time.Second); ok && quiet < 3 && time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
		var n int64
		n, ok = treeCPUTicks(p.Pid)
		if n-prev <= 1 {
			quiet++
		} else {
			quiet = 0
		}
		prev = n
	}
}

// treeCPUTicks returns the CPU time (user and system, in clock ticks) that
// the process pid and its descendants have used, from /proc.
func treeCPUTicks(pid int) (int64, bool) {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	parent := map[int]int{}
	ticks := map[int]int64{}
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the process ended
		}
		// "pid (comm) state ppid … utime stime …"; comm may hold spaces.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 > len(s) {
			continue
		}
		id, _ := strconv.Atoi(strings.TrimSpace(s[:strings.IndexByte(s, '(')]))
		f := strings.Fields(s[i+2:])
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		parent[id], ticks[id] = ppid, ut+st
	}
	if _, ok := ticks[pid]; !ok {
		return 0, false
	}
	var sum int64
	for id, n := range ticks {
		for a := id; a > 1; a = parent[a] {
			if a == pid {
				sum += n
				break
			}
		}
	}
	return sum, true
}
