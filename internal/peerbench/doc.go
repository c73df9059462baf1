// Package peerbench holds side-by-side benchmarks of Sluice's in-process
// path against golang.org/x/time/rate, measured in the same run. It has no
// non-test code; see docs/benchmarks.md for the recorded figures.
package peerbench
