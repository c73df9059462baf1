package jsonout

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
)

func TestDurationJSON(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{1500 * time.Millisecond, `"1.5s"`},
		{250 * time.Microsecond, `"250µs"`},
		{0, `"0s"`},
		{time.Minute, `"1m"`},
		{90 * time.Minute, `"1h30m"`},
		{24 * time.Hour, `"24h"`},
		{time.Minute + 500*time.Millisecond, `"1m0.5s"`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(Duration(tt.d))
		if err != nil || string(b) != tt.want {
			t.Errorf("Marshal(%v) = %s, %v; want %s", tt.d, b, err, tt.want)
		}
		var got Duration
		if err := json.Unmarshal(b, &got); err != nil || got.D() != tt.d {
			t.Errorf("Unmarshal(%s) = %v, %v; want %v", b, got.D(), err, tt.d)
		}
	}
	var d Duration
	if err := json.Unmarshal([]byte("1500000000"), &d); err == nil {
		t.Error("Unmarshal of a number: want an error")
	}
}

func TestConfigJSON(t *testing.T) {
	c := bucket.PerPeriod(bucket.Tokens, 30000, time.Minute)
	b, err := json.Marshal(ConfigOf(c))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"tokens","capacity":30000,"refill_amount":30000,"refill_period":"1m","cost_per_call":1,"max_debt":30000}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	var back Config
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	got, err := back.Bucket()
	if err != nil || got.Type != c.Type || got.Capacity != c.Capacity || got.RefillPeriod != c.RefillPeriod {
		t.Errorf("round trip = %+v, %v; want %+v", got, err, c)
	}
}
