// Package urlparam reads the query options the stores' URL openers share.
package urlparam

import (
	"net/url"
	"strconv"
	"time"

	"github.com/ontopix/sluice/store/storeurl"
)

// Take removes Sluice's own options from q and returns them.
func Take(q url.Values, names ...string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		if q.Has(n) {
			out[n] = q.Get(n)
			q.Del(n)
		}
	}
	return out
}

// Bool reads the boolean option name of opts, def when absent or empty.
func Bool(u *url.URL, opts map[string]string, name string, def bool) (bool, error) {
	v, ok := opts[name]
	if !ok || v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, storeurl.Errorf(u, "%s=%q must be true or false", name, v)
	}
	return b, nil
}

// Duration reads the duration option name of opts, def when absent or
// empty; a negative one is refused.
func Duration(u *url.URL, opts map[string]string, name string, def time.Duration) (time.Duration, error) {
	v, ok := opts[name]
	if !ok || v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, storeurl.Errorf(u, "%s=%q must be a duration such as 2s", name, v)
	}
	return d, nil
}
