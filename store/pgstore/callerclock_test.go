package pgstore

import "testing"

func TestCallerClockReportsTheOption(t *testing.T) {
	for _, tc := range []struct {
		opts []Option
		want bool
	}{{nil, false}, {[]Option{WithCallerClock()}, true}} {
		s := &Store{}
		for _, o := range tc.opts {
			o(s)
		}
		if got := s.CallerClock(); got != tc.want {
			t.Errorf("CallerClock() with %d options = %v, want %v", len(tc.opts), got, tc.want)
		}
	}
}
