package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Vector is one golden scenario: a sequence of operations on a fresh store
// and the exact result of each. testdata/vectors/README.md documents the
// JSON format; every number is an integer (milliseconds or millitokens).
type Vector struct {
	// Name identifies the vector; it matches the file name.
	Name string `json:"name"`
	// Description says what the vector proves.
	Description string `json:"description"`
	// BaseMs is the Unix time in milliseconds that every at_ms and
	// *_at_ms/*_ms timestamp is an offset from.
	BaseMs int64 `json:"base_ms"`
	// Steps run in order.
	Steps []Step `json:"steps"`
}

// Step is one operation and its expected outcome. Fields an operation does
// not use are omitted.
type Step struct {
	AtMs   int64       `json:"at_ms"`
	Op     string      `json:"op"`
	Bucket *BucketSpec `json:"bucket,omitempty"`
	Reset  bool        `json:"reset,omitempty"`
	// IfAbsent and IfMatch make a put_bucket conditional
	// (store.PutBucketRequest); IfMatch's name is ignored.
	IfAbsent    bool        `json:"if_absent,omitempty"`
	IfMatch     *BucketSpec `json:"if_match,omitempty"`
	Name        string      `json:"name,omitempty"`
	Items       []ItemSpec  `json:"items,omitempty"`
	TTLMs       int64       `json:"ttl_ms,omitempty"`
	Record      bool        `json:"record,omitempty"`
	PollMs      int64       `json:"poll_ms,omitempty"`
	Lease       string      `json:"lease,omitempty"`
	Dimension   string      `json:"dimension,omitempty"`
	Delta       int64       `json:"delta,omitempty"`
	FactorMilli int64       `json:"factor_milli,omitempty"`
	CooldownMs  int64       `json:"cooldown_ms,omitempty"`
	Remaining   int64       `json:"remaining,omitempty"`
	Dimensions  []string    `json:"dimensions,omitempty"`
	Limit       int         `json:"limit,omitempty"`
	// MaxWaitMs is a reservation's maximum wait.
	MaxWaitMs int64 `json:"max_wait_ms,omitempty"`
	// QueueMs is an acquisition's ticket lifetime (AcquireRequest.Queue).
	QueueMs int64 `json:"queue_ms,omitempty"`
	// Resend sends the previous step's request again, operation id
	// included, as a driver does after a lost reply (see resendable); the
	// other fields are the previous step's.
	Resend bool   `json:"resend,omitempty"`
	Expect Expect `json:"expect"`
	// Empty makes a put_bucket that creates a time-based bucket start it
	// with a balance of zero (store.PutBucketRequest.Empty).
	Empty bool `json:"empty,omitempty"`
}

// BucketSpec is a bucket configuration in wire form.
type BucketSpec struct {
	Name           string `json:"name"`
	LimitType      string `json:"limit_type"`
	Capacity       int64  `json:"capacity"`
	RefillAmount   int64  `json:"refill_amount,omitempty"`
	RefillPeriodMs int64  `json:"refill_period_ms,omitempty"`
	CostPerCall    int64  `json:"cost_per_call,omitempty"`
	MaxDebt        int64  `json:"max_debt,omitempty"`
}

// Expect is a step's expected outcome. An absent field means zero, false
// or empty, and is compared as such.
type Expect struct {
	Error string `json:"error,omitempty"`
	// acquire
	Granted     bool         `json:"granted,omitempty"`
	RetryInMs   int64        `json:"retry_in_ms,omitempty"`
	Recorded    bool         `json:"recorded,omitempty"`
	ExpiresAtMs int64        `json:"expires_at_ms,omitempty"`
	Items       []ItemExpect `json:"items,omitempty"`
	// Ahead is a queued denial's tickets ahead (AcquireResult.Ahead).
	Ahead int `json:"ahead,omitempty"`
	// reserve: the wait and the valid instant.
	WaitMs    int64 `json:"wait_ms,omitempty"`
	ValidAtMs int64 `json:"valid_at_ms,omitempty"`
	// cancel
	Cancelled bool             `json:"cancelled,omitempty"`
	Returned  []ReturnedExpect `json:"returned,omitempty"`
	// release
	Released      bool             `json:"released,omitempty"`
	RestoredItems []RestoredExpect `json:"restored_items,omitempty"`
	// adjust
	Held      int64 `json:"held,omitempty"`
	Applied   int64 `json:"applied,omitempty"`
	Remaining int64 `json:"remaining,omitempty"`
	// penalize, cooldown and sync
	Before int64 `json:"before,omitempty"`
	After  int64 `json:"after,omitempty"`
	// cooldown
	UntilMs int64 `json:"until_ms,omitempty"`
	// peek
	Buckets []BucketExpect `json:"buckets,omitempty"`
	// reconcile
	Restored      int      `json:"restored,omitempty"`
	Reclaimed     int      `json:"reclaimed,omitempty"`
	AlreadyCapped int      `json:"already_capped,omitempty"`
	Orphans       int      `json:"orphans,omitempty"`
	Dimensions    []string `json:"dimensions,omitempty"`
	More          bool     `json:"more,omitempty"`
}

// ItemSpec is one item of an acquisition: a dimension and a cost in tokens
// (0 means the bucket's cost per call).
type ItemSpec struct {
	Dimension string `json:"dimension"`
	Cost      int64  `json:"cost"`
}

// RestoredExpect is one concurrent item a release gave back.
type RestoredExpect struct {
	Dimension string `json:"dimension"`
	Cost      int64  `json:"cost"`
	Capped    bool   `json:"capped,omitempty"`
}

// ReturnedExpect is what a cancelled reservation gave back to a bucket,
// in millitokens.
type ReturnedExpect struct {
	Dimension string `json:"dimension"`
	Amount    int64  `json:"amount"`
}

// ItemExpect is one acquired item's expected outcome.
type ItemExpect struct {
	Dimension string `json:"dimension"`
	Cost      int64  `json:"cost"`
	Remaining int64  `json:"remaining"`
	RetryInMs int64  `json:"retry_in_ms,omitempty"`
	// Charged is a granted reservation's settlement counter
	// (store.ItemResult.Charged); vectors written before the counter
	// existed leave it out, and then it is not compared.
	Charged *int64 `json:"charged,omitempty"`
}

// BucketExpect is one peeked bucket's expected state.
type BucketExpect struct {
	Name         string `json:"name"`
	Tokens       int64  `json:"tokens"`
	LastRefillMs int64  `json:"last_refill_ms"`
	ActiveLeases int    `json:"active_leases,omitempty"`
	NextExpiryMs *int64 `json:"next_expiry_ms,omitempty"`
	// CooldownUntilMs is the end of the bucket's last cooldown; absent
	// when it never had one.
	CooldownUntilMs *int64 `json:"cooldown_until_ms,omitempty"`
	// ReservedUntilMs is the latest reservation's valid instant; absent
	// when the bucket never had one.
	ReservedUntilMs *int64 `json:"reserved_until_ms,omitempty"`
	// Charged is the bucket's settlement counter
	// (store.BucketState.Charged); as in ItemExpect.
	Charged *int64 `json:"charged,omitempty"`
	// Waiters counts live tickets in a concurrent bucket's queue.
	Waiters int `json:"waiters,omitempty"`
}

// Sentinels maps the error names used in vectors to the errors they match.
var Sentinels = map[string]error{
	"ErrInvalid":             store.ErrInvalid,
	"ErrUnknownDimension":    store.ErrUnknownDimension,
	"ErrCostExceedsCapacity": store.ErrCostExceedsCapacity,
	"ErrUnknownLease":        store.ErrUnknownLease,
	"ErrLeaseExpired":        store.ErrLeaseExpired,
	"ErrLeaseInUse":          store.ErrLeaseInUse,
	"ErrContention":          store.ErrContention,
	"ErrConflict":            store.ErrConflict,
}

// ErrName returns the vector name of the sentinel err matches, or "" for nil.
func ErrName(err error) string {
	if err == nil {
		return ""
	}
	for _, n := range []string{"ErrCostExceedsCapacity", "ErrUnknownDimension", "ErrUnknownLease", "ErrLeaseExpired", "ErrLeaseInUse", "ErrContention", "ErrConflict", "ErrInvalid"} {
		if errors.Is(err, Sentinels[n]) {
			return n
		}
	}
	return "unexpected: " + err.Error()
}

// Config converts the spec to a store.Bucket.
func (b BucketSpec) Config() (store.Bucket, error) {
	t, err := bucket.ParseType(b.LimitType)
	if err != nil {
		return store.Bucket{}, err
	}
	return store.Bucket{Name: b.Name, Config: bucket.Config{Type: t, Capacity: b.Capacity, RefillAmount: b.RefillAmount,
		RefillPeriod: time.Duration(b.RefillPeriodMs) * time.Millisecond, CostPerCall: b.CostPerCall, MaxDebt: b.MaxDebt}}, nil
}

// LoadVectors reads every *.json vector in dir, sorted by file name.
func LoadVectors(dir string) ([]Vector, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var out []Vector
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var v Vector
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// VectorsDir returns the default vectors directory: testdata/vectors under
// the nearest ancestor of the working directory that contains go.mod.
func VectorsDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "testdata", "vectors"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("storetest: no go.mod above the working directory; set Harness.VectorsDir")
		}
		dir = parent
	}
}

func testVectors(t *testing.T, h Harness) {
	dir := h.VectorsDir
	if dir == "" {
		var err error
		if dir, err = VectorsDir(); err != nil {
			t.Fatal(err)
		}
	}
	vs, err := LoadVectors(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) == 0 {
		t.Fatalf("no golden vectors in %s", dir)
	}
	caps := capabilitiesOf(h.NewStore(t))
	for _, v := range vs {
		t.Run(v.Name, func(t *testing.T) {
			if h.AlwaysRecords && dependsOnUnrecorded(v) {
				t.Skip("expectations depend on a lease without a record; the store always records")
			}
			if i, ok := mixesVendors(v); h.SingleVendorAcquire && ok {
				t.Skipf("SKIPPED: step %d acquires dimensions of several vendors (%s) and the store takes single-vendor acquisitions only",
					i, jsonString(v.Steps[i].Items))
			}
			if i, ok := unsupportedStep(v, caps); ok {
				t.Skipf("step %d (%s) is an optional operation the store does not implement", i, v.Steps[i].Op)
			}
			replay(t, h, v)
		})
	}
}

// unsupportedStep returns the index of the first step of v that the
// store cannot run (see capabilities.stepSupported).
func unsupportedStep(v Vector, caps capabilities) (int, bool) {
	for i, st := range v.Steps {
		if !caps.stepSupported(st) {
			return i, true
		}
	}
	return 0, false
}

// dependsOnUnrecorded reports whether a vector has a grant without a record
// and an operation whose outcome a record would change.
func dependsOnUnrecorded(v Vector) bool {
	unrecorded := false
	for _, s := range v.Steps {
		if (s.Op == "acquire" || s.Op == "reserve") && s.Expect.Granted && !s.Expect.Recorded {
			unrecorded = true
		}
		if unrecorded && (s.Op == "reconcile" || s.Op == "peek" || s.Op == "release" || s.Op == "extend" || s.Op == "cancel") {
			return true
		}
	}
	return false
}

// mixesVendors returns the index of the first acquisition of v whose
// dimensions belong to several vendors.
func mixesVendors(v Vector) (int, bool) {
	for i, s := range v.Steps {
		if s.Op != "acquire" {
			continue
		}
		for _, it := range s.Items {
			if vendor(it.Dimension) != vendor(s.Items[0].Dimension) {
				return i, true
			}
		}
	}
	return 0, false
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}

// putRequest builds the store request of a put_bucket step.
func (st Step) putRequest(now time.Time) (store.PutBucketRequest, error) {
	b, err := st.Bucket.Config()
	if err != nil {
		return store.PutBucketRequest{}, err
	}
	req := store.PutBucketRequest{Now: now, Bucket: b, Reset: st.Reset, IfAbsent: st.IfAbsent, Empty: st.Empty}
	if st.IfMatch != nil {
		m, err := st.IfMatch.Config()
		if err != nil {
			return store.PutBucketRequest{}, err
		}
		req.IfMatch = &m.Config
	}
	return req, nil
}
