// Package auth authenticates the callers of sluice serve and authorizes
// what they ask: bearer tokens (kept as SHA-256 hashes in the
// configuration) or TLS client certificates identify a principal; a
// principal may use some verbs on the dimensions its patterns match.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
)

// A Verb is a kind of call a principal may make.
type Verb string

// The verbs. Admin allows every verb on every dimension its patterns
// match.
const (
	// Acquire allows Acquire, Wait, Heartbeat and Release, and Envoy's
	// ShouldRateLimit.
	Acquire Verb = "acquire"
	// Settle allows Settle.
	Settle Verb = "settle"
	// Observe allows Observe: a vendor's response, which may cool a
	// dimension down or lower its balance for the whole fleet.
	Observe Verb = "observe"
	// Read allows Peek, Watch and /metrics.
	Read Verb = "read"
	// Admin allows every verb, and changing buckets.
	Admin Verb = "admin"
)

var verbs = map[Verb]bool{Acquire: true, Settle: true, Observe: true, Read: true, Admin: true}

// Principal is an authenticated caller.
type Principal struct {
	// Name identifies the caller in logs and lease records.
	Name string
	// Verbs are what it may do.
	Verbs []Verb
	// Dimensions are the patterns of the dimensions it may use: "*"
	// matches any run of characters, anything else itself.
	Dimensions []string
	// Expires, when set, ends the principal's token.
	Expires time.Time

	tokenHash []byte // SHA-256 of the bearer token
	certCN    string // a client certificate's subject common name
	certDNS   string // or one of its DNS names
}

// Errors of authorization, as Connect errors.
var (
	errNoCredentials = errors.New("auth: no credentials: send Authorization: Bearer <token> or a client certificate")
	errUnknown       = errors.New("auth: unknown token or certificate")
)

// Allows reports whether p may use verb on every one of dims.
func (p *Principal) Allows(verb Verb, dims ...string) error {
	if !p.has(verb) {
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("auth: %s may not %s", p.Name, verb))
	}
	for _, d := range dims {
		if !p.Matches(d) {
			return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("auth: %s may not %s on %q", p.Name, verb, d))
		}
	}
	return nil
}

// Matches reports whether one of p's patterns matches dim.
func (p *Principal) Matches(dim string) bool {
	for _, pat := range p.Dimensions {
		if glob(pat, dim) {
			return true
		}
	}
	return false
}

func (p *Principal) has(v Verb) bool {
	for _, have := range p.Verbs {
		if have == v || have == Admin {
			return true
		}
	}
	return false
}

// glob matches s against pattern, where "*" matches any run of
// characters.
func glob(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return strings.HasSuffix(s, last) && len(s) >= len(last)
}

// Authenticator finds the principal of a request. Build it with Load or
// Parse; it is safe for concurrent use.
type Authenticator struct {
	principals []*Principal
	now        func() time.Time
}

// HasCertificates reports whether a principal is identified by a client
// certificate.
func (a *Authenticator) HasCertificates() bool {
	for _, p := range a.principals {
		if p.certCN != "" || p.certDNS != "" {
			return true
		}
	}
	return false
}

// authenticate returns the principal of r: its bearer token, else its
// verified client certificate.
func (a *Authenticator) authenticate(r *http.Request) (*Principal, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			return nil, errors.New("auth: the Authorization header is not \"Bearer <token>\"")
		}
		sum := sha256.Sum256([]byte(token))
		for _, p := range a.principals {
			if p.tokenHash != nil && subtle.ConstantTimeCompare(p.tokenHash, sum[:]) == 1 {
				if !p.Expires.IsZero() && !a.now().Before(p.Expires) {
					return nil, fmt.Errorf("auth: the token of %s expired at %s", p.Name, p.Expires.Format(time.RFC3339))
				}
				return p, nil
			}
		}
		return nil, errUnknown
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		if p := a.byCert(r.TLS.VerifiedChains[0][0]); p != nil {
			return p, nil
		}
		return nil, errUnknown
	}
	return nil, errNoCredentials
}

func (a *Authenticator) byCert(c *x509.Certificate) *Principal {
	for _, p := range a.principals {
		if p.certCN != "" && c.Subject.CommonName == p.certCN {
			return p
		}
		if p.certDNS != "" {
			for _, n := range c.DNSNames {
				if n == p.certDNS {
					return p
				}
			}
		}
	}
	return nil
}

type ctxKey struct{}

// FromContext returns the principal a Middleware found, or nil when the
// server has no authentication.
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(ctxKey{}).(*Principal)
	return p
}

// Check returns nil when ctx has no principal (no authentication) or its
// principal may use verb on dims.
func Check(ctx context.Context, verb Verb, dims ...string) error {
	p := FromContext(ctx)
	if p == nil {
		return nil
	}
	return p.Allows(verb, dims...)
}

// Middleware refuses a request without a known, unexpired token or
// certificate before reading its body, in the error format of its
// protocol (Connect, gRPC or gRPC-Web), and passes the principal on in the
// request's context.
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	ew := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.authenticate(r)
		if err != nil {
			cerr := connect.NewError(connect.CodeUnauthenticated, err)
			if ew.IsSupported(r) {
				_ = ew.Write(w, r, cerr)
				return
			}
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, p)))
	})
}

// NewToken returns a fresh bearer token and the hex SHA-256 hash the
// configuration keeps.
func NewToken() (token, hash string) {
	var b [32]byte
	_, _ = rand.Read(b[:])
	token = "slc_" + base64.RawURLEncoding.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(token))
	return token, hex.EncodeToString(sum[:])
}
