package redisstore

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/store/storeurl"
)

// URLOpener opens the Redis URLs for storeurl.Openers: redis://,
// rediss://, redis+cluster:// and rediss+cluster://.
func URLOpener() storeurl.Opener {
	return storeurl.Opener{Schemes: []string{"redis", "rediss", "redis+cluster", "rediss+cluster"}, Open: OpenURL}
}

// OpenURL opens a store on the Redis server or cluster u names (see
// package storeurl for the URL's form). Sluice's own query options
// (prefix, timeout, caller_clock, hash_tag) are taken out; the rest go to
// go-redis (dial_timeout, read_timeout, pool_size, client_name, …). The
// password comes from o (its file, else SLUICE_REDIS_PASSWORD), never
// from u. Connecting is lazy. Closing the Opened closes the client too.
func OpenURL(_ context.Context, u *url.URL, o storeurl.Options) (*storeurl.Opened, error) {
	if err := storeurl.Check(u); err != nil {
		return nil, err
	}
	q := u.Query()
	var opts []Option
	timeout := DefaultTimeout
	if v := q.Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return nil, storeurl.Errorf(u, "timeout=%q must be a duration such as 2s (0 for none)", v)
		}
		timeout = d
	}
	opts = append(opts, WithTimeout(timeout))
	if q.Has("prefix") {
		opts = append(opts, WithPrefix(q.Get("prefix")))
	}
	if v := q.Get("hash_tag"); v != "" {
		opts = append(opts, WithHashTag(v))
	}
	callerClock := false
	if v := q.Get("caller_clock"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, storeurl.Errorf(u, "caller_clock=%q must be true or false", v)
		}
		callerClock = b
		if b {
			opts = append(opts, WithCallerClock())
		}
	}
	for _, k := range []string{"timeout", "prefix", "hash_tag", "caller_clock"} {
		q.Del(k)
	}
	pass, err := o.Password("SLUICE_REDIS_PASSWORD")
	if err != nil {
		return nil, err
	}
	cluster := strings.HasSuffix(u.Scheme, "+cluster")
	base := *u
	base.Scheme = strings.TrimSuffix(u.Scheme, "+cluster")
	base.RawQuery = q.Encode()
	var rdb redis.UniversalClient
	kind := "redis"
	if cluster {
		kind = "redis-cluster"
		hosts := strings.Split(u.Host, ",")
		// addr= names more start-up nodes (go-redis): checked as the host list.
		for _, h := range append(hosts[:len(hosts):len(hosts)], q["addr"]...) {
			if h == "" {
				return nil, storeurl.Errorf(u, "empty host in the cluster's host list")
			}
			if err := checkPort(h); err != nil {
				return nil, storeurl.Errorf(u, "%v", err)
			}
		}
		if p := strings.Trim(u.Path, "/"); p != "" {
			return nil, storeurl.Errorf(u, "a Redis Cluster has only database 0; drop the path %q", u.Path)
		}
		base.Host, base.Path = hosts[0], ""
		for _, h := range hosts[1:] {
			q.Add("addr", h)
		}
		base.RawQuery = q.Encode()
		co, err := redis.ParseClusterURL(base.String())
		if err != nil {
			return nil, storeurl.Errorf(u, "%v", err)
		}
		co.Password = pass
		co.ContextTimeoutEnabled = true // the store's bound costs no goroutine per call
		rdb = redis.NewClusterClient(co)
	} else {
		if u.Host == "" {
			return nil, storeurl.Errorf(u, "name the server, e.g. redis://127.0.0.1:6379/0")
		}
		if err := checkPort(u.Host); err != nil {
			return nil, storeurl.Errorf(u, "%v", err)
		}
		ro, err := redis.ParseURL(base.String())
		if err != nil {
			return nil, storeurl.Errorf(u, "%v", err)
		}
		ro.Password = pass
		ro.ContextTimeoutEnabled = true // the store's bound costs no goroutine per call
		rdb = redis.NewClient(ro)
	}
	st, err := New(rdb, opts...)
	if err != nil {
		_ = rdb.Close()
		return nil, storeurl.Errorf(u, "%v", err)
	}
	return &storeurl.Opened{Store: st, Kind: kind, Redacted: storeurl.Redact(u), SharedClock: !callerClock,
		CloseClient: rdb.Close}, nil
}

// checkPort refuses a host:port whose port is not 1 to 65535, which the
// URL parser lets through ("127.0.0.1:99999") and the dialer would only
// report when a command runs, as an outage. A host without a port is left
// to the client's default.
func checkPort(hostport string) error {
	i := strings.LastIndexByte(hostport, ':')
	if i < 0 || strings.HasSuffix(hostport, "]") {
		return nil
	}
	p := hostport[i+1:]
	if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("host %q: port %q: must be 1 to 65535", hostport, p)
	}
	return nil
}
