package ddbtest

import (
	"context"
	"testing"
	"time"
)

// TestRestart kills a server keeping its tables in a file and restarts it:
// the table is still there.
func TestRestart(t *testing.T) {
	s, err := StartWith(Options{DBPath: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if err := s.Ping(ctx); err == nil {
		t.Fatal("ping after Kill succeeded")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
	}
}
