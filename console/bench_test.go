package console

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
)

// bigFixture fills the fixture's store with 100 dimensions and 1,000 live
// leases (ten on each of the first 100 concurrent dimensions' slots).
func bigFixture(b testing.TB) *fixture {
	f := newFixture(b)
	ctx := context.Background()
	for i := range 97 {
		name := fmt.Sprintf("vendor%02d#slots", i)
		if err := f.c.PutBucket(ctx, sluice.Bucket{Name: name, Config: bucket.ConcurrentSlots(20)}); err != nil {
			b.Fatal(err)
		}
	}
	states, err := f.c.Buckets(ctx)
	if err != nil || len(states) != 100 {
		b.Fatalf("%d buckets, %v; want 100", len(states), err)
	}
	leases := 1 // alice's
	for i := 0; leases < 1000; i++ {
		dim := fmt.Sprintf("vendor%02d#slots", i%97)
		res, err := f.c.Acquire(ctx, dim, sluice.WithCaller(fmt.Sprintf("worker-%d", i%13)), sluice.WithTTL(time.Hour))
		if err != nil || !res.Granted() {
			b.Fatalf("acquire %s: %v %v", dim, res, err)
		}
		leases++
	}
	return f
}

// BenchmarkOverviewFirstPaint measures the overview page's response over
// loopback HTTP, with 100 dimensions and 1,000 live leases: the server's
// part of the first paint (the assets are cached after the first visit).
func BenchmarkOverviewFirstPaint(b *testing.B) {
	f := bigFixture(b)
	for _, path := range []string{"/ui/", "/ui/leases"} {
		b.Run(path, func(b *testing.B) {
			for b.Loop() {
				res, err := http.Get(f.srv.URL + path)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 || n < 10000 {
					b.Fatalf("%s: %d, %d bytes", path, res.StatusCode, n)
				}
			}
		})
	}
}

// BenchmarkTenDashboards measures one refresh tick with ten open event
// streams over loopback HTTP (100 dimensions, 1,000 leases): the state
// read, the render and the ten writes. cpu-ms/tick is the process's CPU
// time per tick (user and system, the readers included); at one tick per
// second, cpu-ms/tick ÷ 10 is the percentage of one core.
func BenchmarkTenDashboards(b *testing.B) {
	f := bigFixture(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	streams := make([]*stream, 10)
	for i := range streams {
		streams[i] = openStream(b, ctx, f.srv.URL+"/ui/events")
	}
	readAll := func() {
		var wg sync.WaitGroup
		for _, s := range streams {
			wg.Go(func() { s.next(b) })
		}
		wg.Wait()
	}
	readAll()
	cpu0 := cpuTime()
	b.ResetTimer()
	for range b.N {
		f.ticks <- t0
		readAll()
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/tick")
}
