package storeurl_test

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/ontopix/sluice/store/allstores"
	"github.com/ontopix/sluice/store/storeurl"
)

// FuzzParse checks the checks every store URL goes through, and opening
// memory://, on any input: no panic, every error is a bad-URL error that
// says what is wrong with the URL, and no error shows a password the URL
// carried. (The network schemes are not opened here: some of their
// options make the client dial at once.)
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"memory://",
		"memory://host",
		"redis://127.0.0.1:6379/0?timeout=2s",
		"rediss+cluster://u:hunter22@a:1,b:2",
		"postgres://u@127.0.0.1:5432/db?sslmode=disable&password=hunter22",
		"postgresql://127.0.0.1/db?SSLPassword=hunter22",
		"dynamodb://table?region=eu-west-1",
		"host=127.0.0.1 password=hunter22",
		"%zz",
		"ftp://x",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := storeurl.Parse(raw)
		if err == nil {
			if u == nil || u.Scheme == "" {
				t.Fatalf("parse(%q) = %v with no error", raw, u)
			}
			if u.Scheme == "memory" {
				op, err := allstores.OpenDetailed(context.Background(), raw, storeurl.Options{})
				if err == nil {
					op.Close()
				}
				checkErr(t, raw, err)
			}
			return
		}
		checkErr(t, raw, err)
	})
}

func checkErr(t *testing.T, raw string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if !errors.Is(err, storeurl.ErrBadURL) || !strings.HasPrefix(err.Error(), storeurl.ErrBadURL.Error()+": ") || len(err.Error()) <= len(storeurl.ErrBadURL.Error())+2 {
		t.Fatalf("parse(%q) = %v, want a bad-URL error that says what is wrong", raw, err)
	}
	for _, secret := range secrets(raw) {
		if len(secret) >= 6 && strings.Count(raw, secret) == 1 && strings.Contains(err.Error(), secret) {
			t.Fatalf("parse(%q) = %v, which shows the password %q", raw, err, secret)
		}
	}
}

// secrets returns the passwords raw carries, in its userinfo or in a
// secret query parameter.
func secrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var out []string
	if p, ok := u.User.Password(); ok {
		out = append(out, p)
	}
	for k, vs := range u.Query() {
		if storeurl.IsSecret(k) {
			out = append(out, vs...)
		}
	}
	return out
}

// FuzzSecretInQuery puts a password pair, its name in any of the spellings
// a server may decode to password or sslpassword, between arbitrary query
// text, with either separator ('&' or ';'), and checks that the URL is
// refused and that neither the error nor the redacted URL shows the
// password, however malformed the rest of the query ("%zz", a stray ';').
func FuzzSecretInQuery(f *testing.F) {
	f.Add("timeout=2s", "x=%zz", false, uint8(0), "hunter2%zz")
	f.Add("", "", true, uint8(3), "hunter22")
	f.Add("a@b", "c=%", true, uint8(5), "hunter2%")
	keys := []string{"password", "PASSWORD", "sslpassword", "SSLPassword", "p%61ssword", "pass%77ord", "%70assword", "Password"}
	f.Fuzz(func(t *testing.T, before, after string, semicolon bool, k uint8, secret string) {
		sep := "&"
		if semicolon {
			sep = ";"
		}
		key := keys[int(k)%len(keys)]
		if len(secret) < 6 || strings.ContainsAny(secret, "&;#") || strings.ContainsAny(before+after, "#") {
			return
		}
		raw := "redis://127.0.0.1:6379/0?" + before + sep + key + "=" + secret + sep + after
		if strings.Count(raw, secret) != 1 || strings.Count(strconv.Quote(raw), secret) != 1 {
			return // not distinctive, or errors quote raw and its escapes could spell it
		}
		_, err := storeurl.Parse(raw)
		if !errors.Is(err, storeurl.ErrBadURL) {
			t.Fatalf("parse(%q) = %v; want a bad-URL error (the URL carries a password)", raw, err)
		}
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("parse(%q) = %v, which shows the password %q", raw, err, secret)
		}
		if u, perr := url.Parse(raw); perr == nil {
			if got := storeurl.Redact(u); strings.Contains(got, secret) {
				t.Fatalf("storeurl.Redact(%q) = %q, which shows the password %q", raw, got, secret)
			}
		}
	})
}
