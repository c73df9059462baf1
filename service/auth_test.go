package service_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/ontopix/sluice"
	limitsfile "github.com/ontopix/sluice/limits"
	"github.com/ontopix/sluice/service"
	"github.com/ontopix/sluice/service/auth"
	sluicev1 "github.com/ontopix/sluice/service/gen/sluice/v1"
	"github.com/ontopix/sluice/service/gen/sluice/v1/sluicev1connect"
	"github.com/ontopix/sluice/store/memstore"
)

// tokens of the principals authFile names.
const (
	appToken     = "slc_app"
	readerToken  = "slc_reader"
	expiredToken = "slc_expired"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// authFile has an application that may acquire requests and tokens of one
// vendor (not settle), a reader, an expired token and a certificate.
var authFile = fmt.Sprintf(`principals:
  - name: app
    token_sha256: %s
    verbs: [acquire]
    dimensions: ["v#rpm", "v#tpm"]
  - name: reader
    token_sha256: %s
    verbs: [read, settle]
    dimensions: ["v#*"]
  - name: old
    token_sha256: %s
    verbs: [admin]
    dimensions: ["*"]
    expires: 2020-01-01T00:00:00Z
  - name: envoy
    client_cert: {common_name: envoy-gateway}
    verbs: [acquire]
    dimensions: ["*"]
`, sha(appToken), sha(readerToken), sha(expiredToken))

// bearer returns a client option sending the token.
func bearer(token string) connect.ClientOption {
	return connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if token != "" {
				req.Header().Set("Authorization", "Bearer "+token)
			}
			return next(ctx, req)
		}
	}))
}

func authed(t *testing.T) *served {
	t.Helper()
	a, err := auth.Parse("auth.yaml", []byte(authFile))
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, "memory", limits, service.WithAuth(a))
}

func (s *served) as(token, proto string) sluicev1connect.LimiterServiceClient {
	return sluicev1connect.NewLimiterServiceClient(s.http.Client(), s.http.URL, append(protocols[proto], bearer(token))...)
}

// TestAuthRefusals checks every refusal: no token, an unknown or expired
// one, a verb or a dimension the principal may not use, another
// principal's lease; each over Connect and gRPC.
func TestAuthRefusals(t *testing.T) {
	s := authed(t)
	ctx := context.Background()
	acquire := func(c sluicev1connect.LimiterServiceClient, dim string) error {
		_, err := c.Acquire(ctx, connect.NewRequest(&sluicev1.AcquireRequest{Items: items(dim, 1)}))
		return err
	}
	for _, proto := range []string{"connect", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			tests := []struct {
				name string
				err  error
				code connect.Code
			}{
				{"no token", acquire(s.as("", proto), "v#rpm"), connect.CodeUnauthenticated},
				{"unknown token", acquire(s.as("slc_nope", proto), "v#rpm"), connect.CodeUnauthenticated},
				{"expired token", acquire(s.as(expiredToken, proto), "v#rpm"), connect.CodeUnauthenticated},
				{"dimension outside its patterns", acquire(s.as(appToken, proto), "v#slots"), connect.CodePermissionDenied},
				{"verb it lacks", acquire(s.as(readerToken, proto), "v#rpm"), connect.CodePermissionDenied},
			}
			for _, tt := range tests {
				if got := codeOf(t, tt.err); got != tt.code {
					t.Errorf("%s: got %v (%v), want %v", tt.name, got, tt.err, tt.code)
				}
			}
		})
	}

	app, reader := s.as(appToken, "connect"), s.as(readerToken, "connect")
	res, err := app.Acquire(ctx, connect.NewRequest(&sluicev1.AcquireRequest{Items: items("v#tpm", 100)}))
	if err != nil {
		t.Fatal(err)
	}
	id := res.Msg.GetLease().GetId()
	if got, want := res.Msg.GetLease().GetCaller(), "app"; got != want {
		t.Errorf("the lease's caller: got %q, want the principal %q", got, want)
	}
	_, err = app.Settle(ctx, connect.NewRequest(&sluicev1.SettleRequest{LeaseId: id, Dimension: "v#tpm", Amount: &sluicev1.SettleRequest_Actual{Actual: 50}}))
	if got, want := codeOf(t, err), connect.CodePermissionDenied; got != want {
		t.Errorf("settle without the verb: got %v, want %v", got, want)
	}
	_, err = reader.Settle(ctx, connect.NewRequest(&sluicev1.SettleRequest{LeaseId: id, Dimension: "v#tpm", Amount: &sluicev1.SettleRequest_Actual{Actual: 50}}))
	if got, want := codeOf(t, err), connect.CodeNotFound; got != want {
		t.Errorf("settle of another principal's lease: got %v, want %v", got, want)
	}
	rel, err := s.as(readerToken, "connect").Release(ctx, connect.NewRequest(&sluicev1.ReleaseRequest{LeaseId: id}))
	if got, want := codeOf(t, err), connect.CodePermissionDenied; got != want {
		t.Errorf("release without acquire: got %v, %v; want %v", got, rel, want)
	}
	rel, err = app.Release(ctx, connect.NewRequest(&sluicev1.ReleaseRequest{LeaseId: id}))
	if err != nil || !rel.Msg.GetReleased() {
		t.Errorf("release by its owner: got %v, %v", rel, err)
	}

	p, err := reader.Peek(ctx, connect.NewRequest(&sluicev1.PeekRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(p.Msg.GetBuckets()), 3; got != want {
		t.Errorf("peek of every bucket: got %d, want %d", got, want)
	}
	_, err = app.Peek(ctx, connect.NewRequest(&sluicev1.PeekRequest{}))
	if got, want := codeOf(t, err), connect.CodePermissionDenied; got != want {
		t.Errorf("peek without read: got %v, want %v", got, want)
	}
}

// TestAuthHealthStaysOpen: probes reach the health check without a token.
func TestAuthHealthStaysOpen(t *testing.T) {
	s := authed(t)
	req, _ := http.NewRequest(http.MethodPost, s.http.URL+"/grpc.health.v1.Health/Check", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got, want := resp.StatusCode, http.StatusOK; got != want {
		t.Errorf("health: got %d, want %d", got, want)
	}
}

// TestAuthClientCertificate identifies a principal by its certificate: a
// certificate of the trusted CA with the configured name is served, one
// with another name is Unauthenticated, and one from another CA fails the
// handshake.
func TestAuthClientCertificate(t *testing.T) {
	ca, caKey := newCA(t, "sluice test CA")
	other, otherKey := newCA(t, "another CA")
	a, err := auth.Parse("auth.yaml", []byte(authFile))
	if err != nil {
		t.Fatal(err)
	}
	c, err := sluice.New(memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range limits {
		if err := c.PutBucket(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := service.New(c, service.WithAuth(a))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv.Handler())
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	hs.TLS = &tls.Config{ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven}
	hs.EnableHTTP2 = true
	hs.StartTLS()
	t.Cleanup(hs.Close)

	call := func(cert tls.Certificate) error {
		tr := hs.Client().Transport.(*http.Transport).Clone()
		tr.TLSClientConfig.Certificates = []tls.Certificate{cert}
		cl := sluicev1connect.NewLimiterServiceClient(&http.Client{Transport: tr}, hs.URL, connect.WithGRPC())
		_, err := cl.Acquire(context.Background(), connect.NewRequest(&sluicev1.AcquireRequest{Items: items("v#slots", 1)}))
		return err
	}
	if err := call(newLeaf(t, ca, caKey, "envoy-gateway")); err != nil {
		t.Errorf("the configured certificate: %v", err)
	}
	if got, want := connect.CodeOf(call(newLeaf(t, ca, caKey, "someone-else"))), connect.CodeUnauthenticated; got != want {
		t.Errorf("a certificate with another name: got %v, want %v", got, want)
	}
	if err := call(newLeaf(t, other, otherKey, "envoy-gateway")); err == nil {
		t.Error("a certificate from an untrusted CA was accepted")
	}
}

func newCA(t *testing.T, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func newLeaf(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// A call with an idempotency key is authorized before any earlier answer
// under the key is looked up: a key reused for a dimension the principal
// may not acquire is refused, not answered with the first call's grant.
func TestIdempotencyKeyIsNoWayAround(t *testing.T) {
	s := authed(t)
	app := s.as(appToken, "connect")
	ctx := context.Background()
	if _, err := app.Acquire(ctx, connect.NewRequest(&sluicev1.AcquireRequest{Items: items("v#tpm", 10), IdempotencyKey: "k"})); err != nil {
		t.Fatal(err)
	}
	res, err := app.Acquire(ctx, connect.NewRequest(&sluicev1.AcquireRequest{Items: items("v#slots", 1), IdempotencyKey: "k"}))
	if got, want := codeOf(t, err), connect.CodePermissionDenied; got != want {
		t.Errorf("v#slots with a reused key: got %v (granted %v, lease on %v), want %v", got, res.Msg.GetGranted(), res.Msg.GetLease().GetItems(), want)
	}
}

// Observe by a principal without the verb is refused as such, before the
// profile is looked up: it learns nothing of the server's profiles.
func TestObserveWithoutTheVerb(t *testing.T) {
	f, err := limitsfile.Parse("limits.yaml", []byte("presets:\n  - preset: anthropic\n    rpm: 50\n    input_tpm: 40000\n    output_tpm: 8000\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.Parse("auth.yaml", []byte(authFile))
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, "memory", limits, service.WithAuth(a), service.WithProfiles(f.Profiles()))
	for _, profile := range []string{"nope", "anthropic"} {
		_, err = s.as(appToken, "connect").Observe(context.Background(), connect.NewRequest(&sluicev1.ObserveRequest{Profile: profile, Status: 200}))
		if got, want := codeOf(t, err), connect.CodePermissionDenied; got != want || strings.Contains(err.Error(), "anthropic") {
			t.Errorf("observe %q by a principal without the verb: got %v (%v), want %v naming no profile", profile, got, err, want)
		}
	}
}
