package storeurl

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// parse checks what every store URL must satisfy: a URL with no password
// in it and one of schemes.
func parse(raw string, schemes []string) (*url.URL, error) {
	if raw == "" {
		return nil, badf("empty store URL (try memory:// or redis://127.0.0.1:6379)")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return nil, badf("%q is not a store URL (try memory:// or redis://127.0.0.1:6379)", redactRaw(raw))
	}
	if err := Check(u); err != nil {
		return nil, err
	}
	if !slices.Contains(schemes, u.Scheme) {
		return nil, badf("scheme %q is not supported (supported: %s)", u.Scheme, strings.Join(schemes, ", "))
	}
	return u, nil
}

// Check refuses a URL that carries a password, in its userinfo or in a
// password or sslpassword query parameter, so that it cannot leak through
// shell history, process listings or logs. Every store's OpenURL checks
// its URL with it; Openers.Open checks every URL before choosing a store.
func Check(u *url.URL) error {
	if _, set := u.User.Password(); set {
		return badf("%s: the URL contains a password; pass it in %s or --password-file instead, never on the command line",
			redact(u), passwordEnv(u.Scheme))
	}
	if k := secretParam(u); k != "" {
		return badf("%s: the URL contains a password (%s=); pass it in %s or --password-file instead, never on the command line",
			redact(u), k, passwordEnv(u.Scheme))
	}
	return nil
}

// Errorf returns a bad-URL error (matching ErrBadURL) about u: the URL,
// safe to print, then the message formatted as fmt.Sprintf does.
func Errorf(u *url.URL, format string, args ...any) error {
	return badf("%s: %s", redact(u), fmt.Sprintf(format, args...))
}

// Redact returns u safe to print: the userinfo's password and the values
// of secret query parameters are replaced by "xxxxx".
func Redact(u *url.URL) string { return redact(u) }

// passwordEnv names the variable a scheme reads its password from.
func passwordEnv(scheme string) string {
	switch scheme {
	case "postgres", "postgresql":
		return "PGPASSWORD"
	case "sluice", "sluices":
		return "SLUICE_TOKEN"
	}
	return "SLUICE_REDIS_PASSWORD"
}

// secretParams are the query parameters that carry a secret (libpq's and
// pgx's password and sslpassword). They are refused like a password in the
// userinfo, whatever their case, since a server may be sent a parameter it
// does not know as is.
var secretParams = []string{"password", "sslpassword"}

// secretParam returns the name of the first query parameter of u (or of
// a key=value pair in its fragment) that carries a secret, or "". It
// reads the raw query itself rather than u.Query(), which drops the pairs
// it cannot decode ("password=hunter2%zz") or that hold a semicolon
// ("a=1;password=hunter2"), although a server may still receive them and
// the URL would be printed as it is.
func secretParam(u *url.URL) string {
	for _, q := range []string{u.RawQuery, u.Fragment} {
		for _, p := range rawParams(q) {
			if isSecret(p.key) {
				return p.key
			}
		}
	}
	return ""
}

func isSecret(key string) bool {
	key = strings.TrimSpace(key)
	for _, s := range secretParams {
		if strings.EqualFold(key, s) {
			return true
		}
	}
	return false
}

// rawParam is one key=value pair of a raw query: its key, decoded
// leniently (see lenientUnescape), and where its value lies in the query.
type rawParam struct {
	key          string
	vstart, vend int
	eq           bool // the pair has a '=': a value, possibly empty
}

// rawParams splits a raw query on both '&' and ';', the separators a
// server may accept, and never fails: a pair without '=' has an empty
// value.
func rawParams(q string) []rawParam {
	var out []rawParam
	start := 0
	for i := 0; i <= len(q); i++ {
		if i < len(q) && q[i] != '&' && q[i] != ';' {
			continue
		}
		pair := q[start:i]
		k, vstart, eq := pair, i, false
		if j := strings.IndexByte(pair, '='); j >= 0 {
			k, vstart, eq = pair[:j], start+j+1, true
		}
		if pair != "" {
			out = append(out, rawParam{key: lenientUnescape(k), vstart: vstart, vend: i, eq: eq})
		}
		start = i + 1
	}
	return out
}

// lenientUnescape decodes the valid %XX escapes and '+' of s and keeps
// every other byte as it is.
func lenientUnescape(s string) string {
	if !strings.ContainsAny(s, "%+") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '+':
			b.WriteByte(' ')
		case s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// redactQuery replaces the value of every secret pair of a raw query by
// "xxxxx", keeping everything else, malformed or not, as it is.
func redactQuery(q string) string {
	ps := rawParams(q)
	for i := len(ps) - 1; i >= 0; i-- {
		if p := ps[i]; p.eq && isSecret(p.key) {
			q = q[:p.vstart] + "xxxxx" + q[p.vend:]
		}
	}
	return q
}

// redact returns u safe to print: the userinfo's password and the values of
// secret query parameters (and fragment pairs) are replaced by "xxxxx",
// however malformed the query.
func redact(u *url.URL) string {
	if secretParam(u) == "" {
		return u.Redacted()
	}
	r := *u
	r.RawQuery = redactQuery(u.RawQuery)
	r.Fragment, r.RawFragment = redactQuery(u.Fragment), ""
	return r.Redacted()
}

// secretRaw matches a secret key=value pair in a string that is not a URL
// (a libpq key/value connection string, say).
var secretRaw = regexp.MustCompile(`(?i)((?:ssl)?password\s*=\s*)('[^']*'|[^\s&]*)`)

// redactRaw hides anything that looks like userinfo or a password in an
// unparsable URL: key=value secrets anywhere, secret query pairs (see
// redactQuery) after the first '?', and everything up to the last '@' (a
// URL parser ends the userinfo there, so a password may hold an '@'; an
// '@' further on only hides more).
func redactRaw(raw string) string {
	raw = secretRaw.ReplaceAllString(raw, "${1}xxxxx")
	if i := strings.IndexByte(raw, '?'); i >= 0 {
		raw = raw[:i+1] + redactQuery(raw[i+1:])
	}
	if i := strings.LastIndex(raw, "@"); i >= 0 {
		if j := strings.Index(raw, "://"); j >= 0 && j < i {
			return raw[:j+3] + "…@" + raw[i+1:]
		}
		return "…@" + raw[i+1:]
	}
	return raw
}
