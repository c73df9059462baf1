package storeurl

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
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
		u, err := parse(raw)
		if err == nil {
			if u == nil || u.Scheme == "" {
				t.Fatalf("parse(%q) = %v with no error", raw, u)
			}
			if u.Scheme == "memory" {
				op, err := OpenDetailed(context.Background(), raw, Options{})
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
	if !errors.Is(err, ErrBadURL) || !strings.HasPrefix(err.Error(), ErrBadURL.Error()+": ") || len(err.Error()) <= len(ErrBadURL.Error())+2 {
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
		if isSecret(k) {
			out = append(out, vs...)
		}
	}
	return out
}
