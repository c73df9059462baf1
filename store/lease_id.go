package store

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
)

// LeaseID identifies a lease: a random (version 4) UUID, kept as 16 bytes so
// that an acquisition that records nothing never formats it.
type LeaseID [16]byte

// NewLeaseID returns a random version 4 UUID. Its 122 random bits come from
// math/rand/v2's global generator: ChaCha8 seeded by the operating system,
// unpredictable and goroutine-safe, and several times faster than
// crypto/rand on the acquire path. Lease ids need uniqueness, not secrecy.
func NewLeaseID() LeaseID {
	var id LeaseID
	binary.LittleEndian.PutUint64(id[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(id[8:], rand.Uint64())
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id
}

// String formats id as a canonical UUID (8-4-4-4-12 lower-case hex).
func (id LeaseID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:], id[10:])
	return string(b[:])
}

// IsZero reports whether id is the zero LeaseID (no lease).
func (id LeaseID) IsZero() bool { return id == LeaseID{} }

// ParseLeaseID parses a canonical UUID string.
func ParseLeaseID(s string) (LeaseID, error) {
	var id LeaseID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, invalid("lease_id", s, "must be a UUID like 3f2b8c1e-0a4d-4c8e-9b1a-2f6d7e8c9a0b")
	}
	var h [32]byte
	copy(h[0:8], s[0:8])
	copy(h[8:12], s[9:13])
	copy(h[12:16], s[14:18])
	copy(h[16:20], s[19:23])
	copy(h[20:32], s[24:36])
	if _, err := hex.Decode(id[:], h[:]); err != nil {
		return LeaseID{}, invalid("lease_id", s, "must be a UUID like 3f2b8c1e-0a4d-4c8e-9b1a-2f6d7e8c9a0b")
	}
	return id, nil
}
