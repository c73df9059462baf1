// Package bench is the root of a separate module holding the benchmarks
// that compare Sluice with other rate limiters in the same run
// (golang.org/x/time/rate, github.com/go-redis/redis_rate), so that the
// library's own go.mod does not depend on them. Run them from this
// directory:
//
//	go test -run '^$' -bench . ./...
//
// docs/benchmarks.md records the figures and the exact commands.
package bench
