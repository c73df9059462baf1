package unary_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ontopix/sluice/service/internal/unary"
)

func TestFlushHiddenFromUnaryOnly(t *testing.T) {
	var flushable bool
	h := unary.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, flushable = w.(http.Flusher)
		if err := http.NewResponseController(w).Flush(); flushable != (err == nil) {
			t.Errorf("%s: Flusher %v, but ResponseController.Flush: %v", r.URL.Path, flushable, err)
		}
		w.Header().Set("X-Path", r.URL.Path)
		_, _ = w.Write([]byte("ok"))
	}), "/svc/Watch")
	tests := []struct {
		path string
		want bool
	}{
		{"/svc/Acquire", false},
		{"/svc/Watch", true},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, tt.path, nil))
		if got := flushable; got != tt.want {
			t.Errorf("%s: flushable %v, want %v", tt.path, got, tt.want)
		}
		if got, want := rec.Body.String(), "ok"; got != want {
			t.Errorf("%s: body %q, want %q", tt.path, got, want)
		}
		if got := rec.Header().Get("X-Path"); got != tt.path {
			t.Errorf("%s: header X-Path %q", tt.path, got)
		}
	}
}
