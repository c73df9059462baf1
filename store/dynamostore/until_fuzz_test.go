package dynamostore

import (
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ontopix/sluice/bucket"
)

func TestParseUntil(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"0", 0, false},
		{"1700000005000", 1700000005000, false},
		{"1.7000000050001E12", 1700000005001, false}, // rounded up: never ends early
		{strconv.FormatInt(bucket.MaxTimeMs, 10), bucket.MaxTimeMs, false},
		{strconv.FormatInt(bucket.MaxTimeMs+1, 10), 0, true},
		{"-1", 0, true},
		{"soon", 0, true},
		{"1e999999999", 0, true},
		{"", 0, true},
	} {
		got, err := parseUntil(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseUntil(%q) = %d, %v; want %d, error %t", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestDecodeUntil checks that a row without cooldown_until_ms (written
// before it existed, or by the Python and TypeScript SDKs) reads as no
// cooldown, and that a bad value is an error naming the attribute.
func TestDecodeUntil(t *testing.T) {
	bi, err := decodeBucket(seedBucket())
	if err != nil || bi.st.Until != 0 {
		t.Fatalf("a row without cooldown_until_ms: Until %v, %v; want 0", bi, err)
	}
	row := seedBucket()
	row[attrUntil] = num("1709550009000")
	if bi, err = decodeBucket(row); err != nil || bi.st.Until != 1709550009000 {
		t.Errorf("cooldown_until_ms 1709550009000: %v, %v", bi, err)
	}
	row[attrUntil] = num("-3")
	if _, err := decodeBucket(row); err == nil || !strings.Contains(err.Error(), attrUntil) {
		t.Errorf("cooldown_until_ms -3: error %v, want one naming %s", err, attrUntil)
	}
	row[attrUntil] = &types.AttributeValueMemberS{Value: "1709550009000"}
	if bi, err := decodeBucket(row); err != nil || bi.st.Until != 0 {
		t.Errorf("cooldown_until_ms as a string: %v, %v; want it ignored", bi, err)
	}
}

// FuzzParseUntil checks that parseUntil never panics, accepts only
// timestamps the math takes, and reads back what encodeBucket writes.
func FuzzParseUntil(f *testing.F) {
	for _, s := range []string{"0", "1700000005000", "1.5", "-0.5", "9007199254740991", "1e12", "1E+400", "0x10", "1/3", " 7 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseUntil(s)
		if err != nil {
			return
		}
		if v < 0 || v > bucket.MaxTimeMs {
			t.Fatalf("parseUntil(%q) = %d, outside 0..MaxTimeMs", s, v)
		}
		back, err := parseUntil(numInt(v).(*types.AttributeValueMemberN).Value)
		if err != nil || back != v {
			t.Fatalf("parseUntil(numInt(%d)) = %d, %v", v, back, err)
		}
	})
}
