package dynamostore

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// tap is an http.RoundTripper between the SDK and DynamoDB Local: it counts
// requests per operation, can ask for ConsumedCapacity on every request
// and sum it, and can inject faults.
type tap struct {
	base     http.RoundTripper
	mu       sync.Mutex
	ops      map[string]int
	capacity bool
	rcu, wcu float64
	// fault, when set, is asked about every request (by operation name)
	// and may return a canned response instead of forwarding it.
	fault func(op string) *http.Response
}

func newTap() *tap { return &tap{base: http.DefaultTransport, ops: map[string]int{}} }

// client returns a DynamoDB client whose requests go through t.
func (t *tap) client() *dynamodb.Client {
	return newClient(func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: t} })
}

func (t *tap) RoundTrip(req *http.Request) (*http.Response, error) {
	op := strings.TrimPrefix(req.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	t.mu.Lock()
	t.ops[op]++
	fault, capacity := t.fault, t.capacity
	t.mu.Unlock()
	if fault != nil {
		if resp := fault(op); resp != nil {
			resp.Request = req
			return resp, nil
		}
	}
	if !capacity || req.Body == nil {
		return t.base.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if json.Unmarshal(body, &m) == nil {
		m["ReturnConsumedCapacity"] = "TOTAL"
		body, _ = json.Marshal(m)
	}
	r2 := req.Clone(req.Context())
	r2.Body, r2.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	r2.Header.Del("X-Amz-Crc32")
	resp, err := t.base.RoundTrip(r2)
	if err != nil {
		return resp, err
	}
	rb, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(rb))
	var out struct {
		ConsumedCapacity json.RawMessage
	}
	if json.Unmarshal(rb, &out) == nil && len(out.ConsumedCapacity) > 0 {
		type cc struct{ ReadCapacityUnits, WriteCapacityUnits, CapacityUnits float64 }
		var one cc
		var many []cc
		if json.Unmarshal(out.ConsumedCapacity, &one) != nil {
			_ = json.Unmarshal(out.ConsumedCapacity, &many)
		} else {
			many = []cc{one}
		}
		t.mu.Lock()
		for _, c := range many {
			r, w := c.ReadCapacityUnits, c.WriteCapacityUnits
			if r == 0 && w == 0 { // reads report only CapacityUnits
				if op == "GetItem" || op == "BatchGetItem" || op == "Scan" || op == "Query" {
					r = c.CapacityUnits
				} else {
					w = c.CapacityUnits
				}
			}
			t.rcu += r
			t.wcu += w
		}
		t.mu.Unlock()
	}
	return resp, nil
}

// reset zeroes the counters.
func (t *tap) reset() {
	t.mu.Lock()
	clear(t.ops)
	t.rcu, t.wcu = 0, 0
	t.mu.Unlock()
}

// total returns the number of requests since the last reset.
func (t *tap) total() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, c := range t.ops {
		n += c
	}
	return n
}

func (t *tap) snapshot() (map[string]int, float64, float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := make(map[string]int, len(t.ops))
	for k, v := range t.ops {
		m[k] = v
	}
	return m, t.rcu, t.wcu
}

// apiError returns a canned DynamoDB JSON error response.
func apiError(status int, typ, msg string, extra map[string]any) *http.Response {
	m := map[string]any{"__type": "com.amazonaws.dynamodb.v20120810#" + typ, "message": msg}
	for k, v := range extra {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return &http.Response{
		StatusCode: status, Status: http.StatusText(status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/x-amz-json-1.0"}, "X-Amzn-Errortype": {typ}},
		Body:          io.NopCloser(bytes.NewReader(b)),
		ContentLength: int64(len(b)),
	}
}

// setFault sets (or, with nil, clears) the fault injector while requests
// may be in flight.
func (t *tap) setFault(f func(op string) *http.Response) {
	t.mu.Lock()
	t.fault = f
	t.mu.Unlock()
}
