package storeurl

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/store/redisstore"
)

// DefaultRedisTimeout bounds every Redis operation unless the URL's timeout
// option says otherwise, so that a dead server is reported as unavailable
// instead of hanging a command.
const DefaultRedisTimeout = redisstore.DefaultTimeout

// openRedis opens redis://, rediss://, redis+cluster:// and
// rediss+cluster://. Sluice's own query options (prefix, timeout,
// caller_clock, hash_tag) are taken out; the rest go to go-redis
// (dial_timeout, read_timeout, pool_size, client_name, …).
func openRedis(_ context.Context, u *url.URL, o Options) (*Opened, error) {
	q := u.Query()
	var opts []redisstore.Option
	timeout := DefaultRedisTimeout
	if v := q.Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return nil, badf("%s: timeout=%q must be a duration such as 2s (0 for none)", redact(u), v)
		}
		timeout = d
	}
	opts = append(opts, redisstore.WithTimeout(timeout))
	if q.Has("prefix") {
		opts = append(opts, redisstore.WithPrefix(q.Get("prefix")))
	}
	if v := q.Get("hash_tag"); v != "" {
		opts = append(opts, redisstore.WithHashTag(v))
	}
	callerClock := false
	if v := q.Get("caller_clock"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, badf("%s: caller_clock=%q must be true or false", redact(u), v)
		}
		callerClock = b
		if b {
			opts = append(opts, redisstore.WithCallerClock())
		}
	}
	for _, k := range []string{"timeout", "prefix", "hash_tag", "caller_clock"} {
		q.Del(k)
	}
	pass, err := o.password("SLUICE_REDIS_PASSWORD")
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
		for _, h := range hosts {
			if h == "" {
				return nil, badf("%s: empty host in the cluster's host list", redact(u))
			}
			if err := checkPort(h); err != nil {
				return nil, badf("%s: %v", redact(u), err)
			}
		}
		if p := strings.Trim(u.Path, "/"); p != "" {
			return nil, badf("%s: a Redis Cluster has only database 0; drop the path %q", redact(u), u.Path)
		}
		base.Host, base.Path = hosts[0], ""
		for _, h := range hosts[1:] {
			q.Add("addr", h)
		}
		base.RawQuery = q.Encode()
		co, err := redis.ParseClusterURL(base.String())
		if err != nil {
			return nil, badf("%s: %v", redact(u), err)
		}
		co.Password = pass
		co.ContextTimeoutEnabled = true // the store's bound costs no goroutine per call
		rdb = redis.NewClusterClient(co)
	} else {
		if u.Host == "" {
			return nil, badf("%s: name the server, e.g. redis://127.0.0.1:6379/0", redact(u))
		}
		if err := checkPort(u.Host); err != nil {
			return nil, badf("%s: %v", redact(u), err)
		}
		ro, err := redis.ParseURL(base.String())
		if err != nil {
			return nil, badf("%s: %v", redact(u), err)
		}
		ro.Password = pass
		ro.ContextTimeoutEnabled = true // the store's bound costs no goroutine per call
		rdb = redis.NewClient(ro)
	}
	st, err := redisstore.New(rdb, opts...)
	if err != nil {
		_ = rdb.Close()
		return nil, badf("%s: %v", redact(u), err)
	}
	return &Opened{Store: st, Kind: kind, Redacted: redact(u), SharedClock: !callerClock,
		closers: []func() error{rdb.Close, st.Close}}, nil
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
