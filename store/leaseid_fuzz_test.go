package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// FuzzParseLeaseID checks ParseLeaseID on any input: no panic; a parsed id
// formats back to the input (in lower case) and parses again to itself;
// anything else is a *bucket.FieldError naming lease_id.
func FuzzParseLeaseID(f *testing.F) {
	for _, s := range []string{
		"3f2b8c1e-0a4d-4c8e-9b1a-2f6d7e8c9a0b",
		"3F2B8C1E-0A4D-4C8E-9B1A-2F6D7E8C9A0B",
		"00000000-0000-0000-0000-000000000000",
		"3f2b8c1e0a4d4c8e9b1a2f6d7e8c9a0b",
		"3f2b8c1e-0a4d-4c8e-9b1a-2f6d7e8c9a0g",
		"",
		"lease#3f2b8c1e",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := store.ParseLeaseID(s)
		if err != nil {
			var fe *bucket.FieldError
			if !errors.As(err, &fe) || fe.Field != "lease_id" || !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("ParseLeaseID(%q) = %v, want a FieldError naming lease_id", s, err)
			}
			if id != (store.LeaseID{}) {
				t.Fatalf("ParseLeaseID(%q) failed but returned %v", s, id)
			}
			return
		}
		if got, want := id.String(), strings.ToLower(s); got != want {
			t.Fatalf("ParseLeaseID(%q).String() = %q, want %q", s, got, want)
		}
		again, err := store.ParseLeaseID(id.String())
		if err != nil || again != id {
			t.Fatalf("ParseLeaseID(%q) = %v, %v; want %v", id.String(), again, err, id)
		}
	})
}
