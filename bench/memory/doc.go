// Package memory holds side-by-side benchmarks of Sluice's in-process path
// (the memory store and the Client) against golang.org/x/time/rate,
// measured in the same run. It has no non-test code; docs/benchmarks.md
// records the figures.
package memory
