package remotestore

import (
	"context"
	"net/url"
	"time"

	"github.com/ontopix/sluice/store/storeurl"
)

// URLOpener opens sluice://host:port (plain HTTP) and sluices://host:port
// (HTTPS): the store door of a sluice serve. The bearer token comes from
// SLUICE_TOKEN or the password file, never from the URL; timeout= bounds
// an operation without a deadline (default 2s).
func URLOpener() storeurl.Opener {
	return storeurl.Opener{Schemes: []string{"sluice", "sluices"}, Open: OpenURL}
}

// OpenURL opens a sluice:// or sluices:// URL (see URLOpener).
func OpenURL(ctx context.Context, u *url.URL, o storeurl.Options) (*storeurl.Opened, error) {
	if err := storeurl.Check(u); err != nil {
		return nil, err
	}
	if u.Host == "" || (u.Path != "" && u.Path != "/") {
		return nil, storeurl.Errorf(u, "%s:// takes host:port and no path, e.g. sluice://127.0.0.1:7070", u.Scheme)
	}
	opts := []Option{}
	for k, v := range u.Query() {
		switch k {
		case "timeout":
			d, err := time.ParseDuration(v[0])
			if err != nil || d <= 0 {
				return nil, storeurl.Errorf(u, "timeout=%q: must be a positive duration such as 2s", v[0])
			}
			opts = append(opts, WithTimeout(d))
		default:
			return nil, storeurl.Errorf(u, "unknown option %q (sluice:// takes timeout=)", k)
		}
	}
	token, err := o.Password("SLUICE_TOKEN")
	if err != nil {
		return nil, err
	}
	if token != "" {
		opts = append(opts, WithToken(token))
	}
	scheme := "http"
	if u.Scheme == "sluices" {
		scheme = "https"
	}
	st, err := Open(ctx, scheme+"://"+u.Host, opts...)
	if err != nil {
		return nil, err
	}
	return &storeurl.Opened{Store: st, Kind: "sluice", Redacted: u.Scheme + "://" + u.Host}, nil
}
