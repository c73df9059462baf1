package memstore

import (
	"context"
	"net/url"

	"github.com/ontopix/sluice/store/storeurl"
)

// URLOpener opens memory:// for storeurl.Openers.
func URLOpener() storeurl.Opener {
	return storeurl.Opener{Schemes: []string{"memory"}, Open: OpenURL}
}

// OpenURL opens memory://, which takes no host, path or options: o.Memory
// when set (which closing the Opened leaves open), else a new Store, which
// lives only as long as the process.
func OpenURL(_ context.Context, u *url.URL, o storeurl.Options) (*storeurl.Opened, error) {
	if err := storeurl.Check(u); err != nil {
		return nil, err
	}
	if u.Host != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, storeurl.Errorf(u, "memory:// takes no host, path or options")
	}
	if o.Memory != nil {
		return &storeurl.Opened{Store: o.Memory, Kind: "memory", Redacted: "memory://", SharedClock: true, Borrowed: true}, nil
	}
	return &storeurl.Opened{Store: New(), Kind: "memory", Redacted: "memory://", SharedClock: true}, nil
}
