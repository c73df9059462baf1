# Everyday commands. CI runs .ci/run, which does what `make lint test` does
# plus installing the servers and tools.

GO ?= go
STATICCHECK ?= staticcheck
# BENCH selects benchmarks (go test -bench) and BENCHPKG the library's
# packages to run them in; the bench module runs all of its own.
BENCH ?= .
BENCHPKG ?= ./...

.PHONY: test test-short lint bench

# Every package with the race detector against real servers the tests
# start on free loopback ports (redis-server, PostgreSQL, DynamoDB Local).
test:
	./scripts/test.sh

# Unit tests only: no servers; every test that needs one is skipped.
test-short:
	$(GO) test -short ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd bench && $(GO) vet ./...
	$(STATICCHECK) ./...
	cd bench && $(STATICCHECK) ./...

# Benchmarks of the library and, in the bench module, the side-by-side
# comparisons with golang.org/x/time/rate and go-redis/redis_rate. Store
# benchmarks start their servers as the tests do.
bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem $(BENCHPKG)
	cd bench && $(GO) test -run '^$$' -bench '$(BENCH)' -benchmem ./...
