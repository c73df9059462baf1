package console_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/console"
	"github.com/ontopix/sluice/history"
	"github.com/ontopix/sluice/store/memstore"
)

// The console mounted at /ui/ of an application's own mux, with a usage
// history recorded from the Client.
func Example() {
	ctx := context.Background()
	st := memstore.New()
	rec, err := history.New(st)
	if err != nil {
		log.Fatal(err)
	}
	go rec.Run(ctx) // writes the history to the store every 10 s
	c, err := sluice.New(st, sluice.WithObserver(rec.Observer()))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.PutBucket(ctx, sluice.Bucket{Name: "openai#rpm", Config: bucket.PerPeriod(bucket.Requests, 500, time.Minute)}); err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.Handle("/ui/", http.StripPrefix("/ui", console.Handler(c, console.WithHistory(rec))))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	res, err := http.Get(srv.URL + "/ui/")
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	page, _ := io.ReadAll(res.Body)
	fmt.Println(res.StatusCode, strings.Contains(string(page), `<a href="d/openai%23rpm">openai#rpm</a>`))
	// Output: 200 true
}
