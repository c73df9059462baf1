//go:build race

package repocheck

// raceEnabled is true when the tests run with -race: the commands the
// docs' checks build are then built with -race too, from the packages the
// test run has compiled already, instead of compiling every dependency a
// second time.
const raceEnabled = true
