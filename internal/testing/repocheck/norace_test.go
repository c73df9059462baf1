//go:build !race

package repocheck

// raceEnabled is true when the tests run with -race (see race_test.go).
const raceEnabled = false
