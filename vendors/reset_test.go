package vendors

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testNow is the instant every parser test treats as now.
var testNow = time.Date(2026, 11, 23, 14, 0, 0, 0, time.UTC)

func unix(d time.Duration) string   { return strconv.FormatInt(testNow.Add(d).Unix(), 10) }
func millis(d time.Duration) string { return strconv.FormatInt(testNow.Add(d).UnixMilli(), 10) }

func TestParseReset(t *testing.T) {
	tests := []struct {
		format ResetFormat
		value  string
		want   time.Duration // from testNow; ignored when reason is set
		reason string        // a substring of the error's reason; "" for success
	}{
		// OpenAI and Groq: Go-style durations, every example seen.
		{ResetDuration, "6m0s", 6 * time.Minute, ""},
		{ResetDuration, "1s", time.Second, ""},
		{ResetDuration, "20ms", 20 * time.Millisecond, ""},
		{ResetDuration, "12ms", 12 * time.Millisecond, ""},
		{ResetDuration, "9ms", 9 * time.Millisecond, ""},
		{ResetDuration, "17ms", 17 * time.Millisecond, ""},
		{ResetDuration, "1.5s", 1500 * time.Millisecond, ""},
		{ResetDuration, "7.66s", 7660 * time.Millisecond, ""},
		{ResetDuration, "2m59.56s", 2*time.Minute + 59560*time.Millisecond, ""},
		{ResetDuration, "11m32.334s", 11*time.Minute + 32334*time.Millisecond, ""},
		{ResetDuration, "23h47m36.648s", 23*time.Hour + 47*time.Minute + 36648*time.Millisecond, ""},
		{ResetDuration, " 1s ", time.Second, ""},
		{ResetDuration, "0s", 0, "zero"},
		{ResetDuration, "0", 0, "zero"}, // time.ParseDuration accepts a bare "0"
		{ResetDuration, "0ms", 0, "zero"},
		{ResetDuration, "-1s", 0, "negative"},
		{ResetDuration, "12", 0, "no unit"},
		{ResetDuration, "1782129600000", 0, "no unit"},
		{ResetDuration, "2026-11-23T14:00:05Z", 0, "not a Go-style duration"},
		{ResetDuration, "9000h", 0, "more than a year"},
		{ResetDuration, "99999999999h", 0, "not a Go-style duration"}, // overflows
		{ResetDuration, "NaN", 0, "not a Go-style duration"},
		{ResetDuration, "", 0, "empty"},
		// Anthropic: RFC 3339, fractional seconds and offsets.
		{ResetRFC3339, "2026-11-23T14:00:05Z", 5 * time.Second, ""},
		{ResetRFC3339, "2026-11-23T14:00:05.250Z", 5250 * time.Millisecond, ""},
		{ResetRFC3339, "2026-11-23T15:00:05+01:00", 5 * time.Second, ""},
		{ResetRFC3339, "2026-11-23T08:00:05.5-06:00", 5500 * time.Millisecond, ""},
		{ResetRFC3339, "2026-11-23T14:00:00Z", 0, "not after now"},
		{ResetRFC3339, "2026-11-23T13:59:59Z", 0, "already passed"},
		{ResetRFC3339, "2025-01-01T00:00:00Z", 0, "more than a year in the past"},
		{ResetRFC3339, "2028-01-01T00:00:00Z", 0, "more than a year"},
		{ResetRFC3339, "6m0s", 0, "not an RFC 3339"},
		{ResetRFC3339, "1782129600", 0, "not an RFC 3339"},
		// Azure: bare seconds; 0 and -1 are "no value", never "reset now".
		{ResetSeconds, "12", 12 * time.Second, ""},
		{ResetSeconds, "300", 300 * time.Second, ""},
		{ResetSeconds, "10", 10 * time.Second, ""},
		{ResetSeconds, "1.5", 1500 * time.Millisecond, ""},
		{ResetSeconds, "6m0s", 6 * time.Minute, ""}, // a unit is unambiguous
		{ResetSeconds, "0", 0, "zero"},
		{ResetSeconds, "-1", 0, "negative"},
		{ResetSeconds, "NaN", 0, "not a number"},
		{ResetSeconds, "Inf", 0, "not a number"},
		{ResetSeconds, "1e3", 0, "not a number"},
		{ResetSeconds, "0x10", 0, "not a number"},
		{ResetSeconds, "1.", 0, "not a number"},
		{ResetSeconds, ".5", 0, "not a number"},
		{ResetSeconds, "40000000", 0, "more than a year"},
		// Anthropic unified: epoch seconds.
		{ResetEpochSeconds, unix(time.Hour), time.Hour, ""},
		{ResetEpochSeconds, unix(time.Hour) + ".5", time.Hour + 500*time.Millisecond, ""},
		{ResetEpochSeconds, unix(-time.Second), 0, "not after now"},
		{ResetEpochSeconds, "0", 0, "zero"},
		{ResetEpochSeconds, "-1", 0, "negative"},
		{ResetEpochSeconds, "300", 0, "more than a year in the past"},
		{ResetEpochSeconds, millis(time.Hour), 0, "more than a year"},
		{ResetEpochSeconds, "6m0s", 0, "not a number"},
		// OpenRouter: epoch milliseconds. The 6m0s-as-epoch and the RFC 3339
		// read as 2026 ms bugs are refused, not misread.
		{ResetEpochMillis, millis(5 * time.Second), 5 * time.Second, ""},
		{ResetEpochMillis, millis(1500 * time.Millisecond), 1500 * time.Millisecond, ""},
		{ResetEpochMillis, "6m0s", 0, "not a number"},
		{ResetEpochMillis, "2026-11-23T14:00:05Z", 0, "not a number"},
		{ResetEpochMillis, unix(time.Hour), 0, "more than a year in the past"},
		{ResetEpochMillis, "99999999999999999999", 0, "more than a year"},
		// Unknown vendor: by shape, then by magnitude.
		{ResetAuto, "6m0s", 6 * time.Minute, ""},
		{ResetAuto, "7.66s", 7660 * time.Millisecond, ""},
		{ResetAuto, "12", 12 * time.Second, ""},
		{ResetAuto, unix(time.Hour), time.Hour, ""},
		{ResetAuto, millis(5 * time.Second), 5 * time.Second, ""},
		{ResetAuto, "2026-11-23T14:00:05Z", 5 * time.Second, ""},
		{ResetAuto, testNow.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second, ""},
		{ResetAuto, "50000000", 0, "more than a year"},
		{ResetAuto, "0", 0, "zero"},
		{ResetAuto, "soon", 0, "not a number"},
		{ResetAuto, "-", 0, "not a number"},
		{ResetFormat(99), "1s", 0, "unknown reset format"},
	}
	for _, tt := range tests {
		got, err := ParseReset(tt.format, tt.value, testNow)
		if tt.reason != "" {
			if err == nil {
				t.Errorf("ParseReset(%s, %q) = %v, want an error with %q", tt.format, tt.value, got, tt.reason)
				continue
			}
			if !errors.Is(err, ErrUnusableValue) || !strings.Contains(err.Error(), tt.reason) || !strings.Contains(err.Error(), strconv.Quote(tt.value)) {
				t.Errorf("ParseReset(%s, %q) error = %v, want ErrUnusableValue naming the value and %q", tt.format, tt.value, err, tt.reason)
			}
			if !got.IsZero() {
				t.Errorf("ParseReset(%s, %q) = %v with an error, want the zero time", tt.format, tt.value, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseReset(%s, %q) error = %v", tt.format, tt.value, err)
			continue
		}
		if want := testNow.Add(tt.want); !got.Equal(want) {
			t.Errorf("ParseReset(%s, %q) = %v, want %v", tt.format, tt.value, got, want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	tests := []struct {
		value  string
		want   time.Duration
		reason string
	}{
		{"33", 33 * time.Second, ""},
		{"1", time.Second, ""},
		{"1.5", 1500 * time.Millisecond, ""},
		{" 30 ", 30 * time.Second, ""},
		// RFC 9110 IMF-fixdate, and the obsolete RFC 850 and ANSI C forms.
		{testNow.Add(2 * time.Minute).Format(http.TimeFormat), 2 * time.Minute, ""},
		{"Monday, 23-Nov-26 14:02:00 GMT", 2 * time.Minute, ""},
		{"Mon Nov 23 14:02:00 2026", 2 * time.Minute, ""},
		{testNow.Format(http.TimeFormat), 0, "HTTP date not after now"},
		{testNow.Add(-time.Hour).Format(http.TimeFormat), 0, "HTTP date not after now"},
		{testNow.Add(400 * 24 * time.Hour).Format(http.TimeFormat), 0, "more than a year"},
		{"0", 0, "zero"},
		{"-5", 0, "negative"},
		{"NaN", 0, "not a number"},
		{"+Inf", 0, "not a number"},
		{"1e3", 0, "not a number"},
		{"soon", 0, "not a number"},
		{"99999999999", 0, "more than a year"},
		{"", 0, "empty"},
	}
	for _, tt := range tests {
		got, err := ParseRetryAfter(tt.value, testNow)
		if tt.reason != "" {
			if err == nil || !errors.Is(err, ErrUnusableValue) || !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("ParseRetryAfter(%q) = %v, %v; want an error with %q", tt.value, got, err, tt.reason)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v", tt.value, got, err, tt.want)
		}
	}
}

func TestParseRetryAfterMs(t *testing.T) {
	tests := []struct {
		value  string
		want   time.Duration
		reason string
	}{
		{"644", 644 * time.Millisecond, ""},
		{"20.5", 20500 * time.Microsecond, ""},
		{"33000", 33 * time.Second, ""},
		{"0", 0, "zero"},
		{"-1", 0, "negative"},
		{"1e3", 0, "not a number"},
		{"NaN", 0, "not a number"},
		{"99999999999999", 0, "more than a year"},
		{"", 0, "empty"},
	}
	for _, tt := range tests {
		got, err := ParseRetryAfterMs(tt.value)
		if tt.reason != "" {
			if err == nil || !errors.Is(err, ErrUnusableValue) || !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("ParseRetryAfterMs(%q) = %v, %v; want an error with %q", tt.value, got, err, tt.reason)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseRetryAfterMs(%q) = %v, %v; want %v", tt.value, got, err, tt.want)
		}
	}
}

func TestResetFormatString(t *testing.T) {
	for f, want := range map[ResetFormat]string{
		ResetAuto: "auto", ResetDuration: "duration", ResetRFC3339: "rfc3339", ResetSeconds: "seconds",
		ResetEpochSeconds: "epoch-seconds", ResetEpochMillis: "epoch-millis", ResetFormat(42): "ResetFormat(42)",
	} {
		if got := f.String(); got != want {
			t.Errorf("ResetFormat(%d).String() = %q, want %q", uint8(f), got, want)
		}
	}
}

func TestValueErrorNamesField(t *testing.T) {
	err := &ValueError{Field: "x-ratelimit-reset-tokens", Value: "0", Reason: "zero"}
	want := `vendors: unusable x-ratelimit-reset-tokens value "0": zero`
	if got := err.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
