package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

var t0 = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)

func usageRow() store.UsageRow {
	return store.UsageRow{Dimension: "openai#rpm", Caller: "alice", Period: time.Minute, Start: t0, Writer: "w1",
		Counters: map[string]int64{"grants": 1}, Updated: t0.Add(time.Second)}
}

func TestValidateUsage(t *testing.T) {
	tests := []struct {
		name      string
		mut       func(*store.UsageRow)
		ret       store.UsageRetention
		wantField string // "" means valid
		wantValue string
	}{
		{"valid", func(*store.UsageRow) {}, store.UsageRetention{}, "", ""},
		{"valid hour row", func(r *store.UsageRow) { r.Period = time.Hour }, store.UsageRetention{}, "", ""},
		{"no caller, no counters", func(r *store.UsageRow) { r.Caller, r.Counters = "", nil }, store.UsageRetention{}, "", ""},
		{"no updated", func(r *store.UsageRow) { r.Updated = time.Time{} }, store.UsageRetention{}, "updated", "0001-01-01T00:00:00Z"},
		{"empty dimension", func(r *store.UsageRow) { r.Dimension = "" }, store.UsageRetention{}, "dimension", ""},
		{"lease# dimension", func(r *store.UsageRow) { r.Dimension = "lease#x" }, store.UsageRetention{}, "dimension", "lease#x"},
		{"second period", func(r *store.UsageRow) { r.Period = time.Second }, store.UsageRetention{}, "period", "1s"},
		{"unaligned start", func(r *store.UsageRow) { r.Start = t0.Add(time.Millisecond) }, store.UsageRetention{}, "start", "2026-01-01T10:00:00.001Z"},
		{"hour row on a minute", func(r *store.UsageRow) { r.Period, r.Start = time.Hour, t0.Add(time.Minute) }, store.UsageRetention{}, "start", "2026-01-01T10:01:00Z"},
		{"start before 1970", func(r *store.UsageRow) { r.Start = time.Unix(-3600, 0) }, store.UsageRetention{}, "start", "1969-12-31T23:00:00Z"},
		{"updated before 1970", func(r *store.UsageRow) { r.Updated = time.Unix(-1, 0) }, store.UsageRetention{}, "updated", "1969-12-31T23:59:59Z"},
		{"empty writer", func(r *store.UsageRow) { r.Writer = "" }, store.UsageRetention{}, "writer", ""},
		{"long caller", func(r *store.UsageRow) { r.Caller = strings.Repeat("c", store.MaxCallerLen+1) }, store.UsageRetention{}, "caller", "ccc"},
		{"empty counter name", func(r *store.UsageRow) { r.Counters = map[string]int64{"": 2} }, store.UsageRetention{}, "counter name", ""},
		{"negative minute retention", func(*store.UsageRow) {}, store.UsageRetention{Minute: -1}, "retention.minute", "-1ns"},
		{"negative hour retention", func(*store.UsageRow) {}, store.UsageRetention{Hour: -time.Hour}, "retention.hour", "-1h0m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := usageRow()
			tt.mut(&r)
			err := store.ValidateUsage([]store.UsageRow{usageRow(), r}, tt.ret)
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("ValidateUsage: %v, want nil", err)
				}
				return
			}
			var fe *bucket.FieldError
			if !errors.Is(err, store.ErrInvalid) || !errors.As(err, &fe) {
				t.Fatalf("ValidateUsage: %v, want a *bucket.FieldError matching store.ErrInvalid", err)
			}
			if got := fe.Field; got != tt.wantField {
				t.Errorf("field = %q, want %q", got, tt.wantField)
			}
			if got := fmt.Sprint(fe.Value); !strings.Contains(got, tt.wantValue) {
				t.Errorf("value = %q, want it to contain %q", got, tt.wantValue)
			}
		})
	}
	mixed := usageRow()
	mixed.Dimension = "openai#tpm"
	err := store.ValidateUsage([]store.UsageRow{usageRow(), mixed}, store.UsageRetention{})
	if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "usage row 1") || !strings.Contains(err.Error(), `"openai#rpm"`) {
		t.Errorf("two dimensions in one put: %v, want an ErrInvalid naming row 1 and the first dimension", err)
	}
}

func TestValidateUsageQuery(t *testing.T) {
	ok := store.UsageQuery{Dimension: "openai#rpm", Period: time.Hour, From: t0, To: t0.Add(time.Hour)}
	tests := []struct {
		name, wantField string
		mut             func(*store.UsageQuery)
	}{
		{"valid", "", func(*store.UsageQuery) {}},
		{"empty range", "", func(q *store.UsageQuery) { q.To = q.From }},
		{"no dimension", "dimension", func(q *store.UsageQuery) { q.Dimension = "" }},
		{"day period", "period", func(q *store.UsageQuery) { q.Period = 24 * time.Hour }},
		{"to before from", "to", func(q *store.UsageQuery) { q.To = q.From.Add(-time.Minute) }},
		{"from before 1970", "from", func(q *store.UsageQuery) { q.From = time.Unix(-3600, 0) }},
		{"both before 1970", "from", func(q *store.UsageQuery) { q.From, q.To = time.Unix(-7200, 0), time.Unix(-3600, 0) }},
		{"to after 9999", "to", func(q *store.UsageQuery) { q.To = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }},
	}
	for _, tt := range tests {
		q := ok
		tt.mut(&q)
		err := store.ValidateUsageQuery(q)
		var fe *bucket.FieldError
		switch {
		case tt.wantField == "" && err != nil:
			t.Errorf("%s: %v, want nil", tt.name, err)
		case tt.wantField != "" && (!errors.As(err, &fe) || fe.Field != tt.wantField):
			t.Errorf("%s: %v, want a FieldError on %q", tt.name, err, tt.wantField)
		}
	}
}

func TestUsageRetention(t *testing.T) {
	tests := []struct {
		ret  store.UsageRetention
		p    time.Duration
		want time.Duration
	}{
		{store.UsageRetention{}, time.Minute, 48 * time.Hour},
		{store.UsageRetention{}, time.Hour, 90 * 24 * time.Hour},
		{store.UsageRetention{Minute: time.Hour}, time.Minute, time.Hour},
		{store.UsageRetention{Minute: time.Hour}, time.Hour, 90 * 24 * time.Hour},
		{store.UsageRetention{Hour: 3 * time.Hour}, time.Hour, 3 * time.Hour},
	}
	for _, tt := range tests {
		if got := tt.ret.For(tt.p); got != tt.want {
			t.Errorf("%+v.For(%s) = %s, want %s", tt.ret, tt.p, got, tt.want)
		}
	}
	r := usageRow()
	if got, want := r.Expires(store.UsageRetention{Minute: time.Hour}), t0.Add(61*time.Minute); !got.Equal(want) {
		t.Errorf("Expires = %s, want %s", got, want)
	}
}

// ExampleValidateUsage shows the error for a row whose start is not a
// whole minute.
func ExampleValidateUsage() {
	row := store.UsageRow{Dimension: "openai#rpm", Period: time.Minute, Writer: "w1",
		Start: time.Date(2026, 1, 1, 10, 0, 30, 0, time.UTC)}
	err := store.ValidateUsage([]store.UsageRow{row}, store.UsageRetention{})
	fmt.Println(err)
	fmt.Println(errors.Is(err, store.ErrInvalid))
	// Output:
	// usage row 0: sluice: invalid start "2026-01-01T10:00:30Z": must be a multiple of the period (1m0s) since the Unix epoch
	// true
}
