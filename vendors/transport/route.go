package transport

import (
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/vendors"
)

// Route sends the requests for a host (and path prefix) to a vendor's
// profiles.
type Route struct {
	// Host is the request URL's host, with its port when it has one
	// ("api.openai.com", "127.0.0.1:8080"), or "*.example.com" for every
	// subdomain of example.com (any port). Case, a trailing dot and the
	// scheme's default port (443 for https, 80 for http) do not matter:
	// "https://API.openai.com.:443" is routed as "api.openai.com".
	Host string
	// PathPrefix, when set, limits the route to paths that start with it
	// ("/openai/"); the endpoint is recognised in the rest of the path.
	PathPrefix string
	// Vendor is whose API the host speaks and whose profiles apply.
	Vendor vendors.Vendor
}

// defaultRoutes are the vendors' own hosts.
var defaultRoutes = []Route{
	{Host: "api.openai.com", Vendor: vendors.OpenAI},
	{Host: "*.api.openai.com", Vendor: vendors.OpenAI}, // regional: eu.api.openai.com
	{Host: "*.openai.azure.com", Vendor: vendors.Azure},
	{Host: "*.cognitiveservices.azure.com", Vendor: vendors.Azure},
	{Host: "api.anthropic.com", Vendor: vendors.Anthropic},
	{Host: "api.groq.com", PathPrefix: "/openai/", Vendor: vendors.Groq},
}

func (r Route) validate(i int) error {
	field := "routes[" + strconv.Itoa(i) + "]"
	if r.Host == "" || strings.ContainsAny(r.Host, "/ ") || strings.Count(r.Host, "*") > 1 ||
		strings.Contains(r.Host, "*") && !strings.HasPrefix(r.Host, "*.") {
		return &bucket.FieldError{Field: field + ".host", Value: r.Host, Reason: `must be a host[:port] or "*.domain"`}
	}
	if r.Vendor == "" {
		return &bucket.FieldError{Field: field + ".vendor", Value: r.Vendor, Reason: "must name a vendor"}
	}
	if r.PathPrefix != "" && !strings.HasPrefix(r.PathPrefix, "/") {
		return &bucket.FieldError{Field: field + ".path_prefix", Value: r.PathPrefix, Reason: `must start with "/"`}
	}
	return nil
}

// matches reports whether the route applies to req.
func (r Route) matches(req *http.Request) bool {
	if req.URL == nil {
		return false
	}
	host := req.URL.Host
	if host == "" {
		host = req.Host
	}
	host = normalHost(req.URL.Scheme, host)
	if suffix, ok := strings.CutPrefix(normalHost("", r.Host), "*"); ok {
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if len(host) <= len(suffix) || !strings.EqualFold(host[len(host)-len(suffix):], suffix) {
			return false
		}
	} else if !strings.EqualFold(host, normalHost(req.URL.Scheme, r.Host)) {
		return false
	}
	return r.PathPrefix == "" || strings.HasPrefix(req.URL.Path, r.PathPrefix)
}

// normalHost returns host as a route compares it: without the trailing
// dot of a fully qualified name ("api.openai.com."), and without the
// scheme's default port (":443" for https, ":80" for http), so that every
// spelling of a vendor's host is routed.
func normalHost(scheme, host string) string {
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		h, port = host, ""
	}
	h = strings.TrimSuffix(h, ".")
	if port == "" || port == "443" && strings.EqualFold(scheme, "https") || port == "80" && strings.EqualFold(scheme, "http") {
		if strings.Contains(h, ":") {
			return "[" + h + "]"
		}
		return h
	}
	return net.JoinHostPort(h, port)
}

// route returns the first route for req.
func (t *Transport) route(req *http.Request) (Route, bool) {
	for _, r := range t.routes {
		if r.matches(req) {
			return r, true
		}
	}
	return Route{}, false
}
