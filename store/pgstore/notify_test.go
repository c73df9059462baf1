package pgstore

import (
	"testing"

	"github.com/ontopix/sluice/store/storetest"
)

// A watch that heard nothing for several of its listening rounds still
// hears the next release, and ends with ErrClosed once the store is
// closed.
func TestWatchFreedAfterIdleAndClose(t *testing.T) {
	s := newStore(t)
	storetest.FreedAfterIdleAndClose(t, s, listenPoll, s.Close)
}
