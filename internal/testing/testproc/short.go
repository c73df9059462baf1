package testproc

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// Short reports whether the tests run with -short. It parses the test
// flags first if TestMain has not.
func Short() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	return testing.Short()
}

// SkipPackage reports whether the tests run with -short and, if so, prints
// that the package's tests are skipped because they need server. A TestMain
// whose tests all share servers it starts calls it first and exits 0 when
// it returns true:
//
//	if testproc.SkipPackage("redis-server") {
//		os.Exit(0)
//	}
func SkipPackage(server string) bool {
	if !Short() {
		return false
	}
	fmt.Fprintf(os.Stdout, "skipped in -short mode: these tests need %s\n", server)
	return true
}
