package cli

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice/service/auth"
)

// serveTLS returns the server's TLS configuration, nil for plain HTTP.
func serveTLS(o *serveOptions, authn *auth.Authenticator) (*tls.Config, error) {
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return nil, usagef("invalid --tls-cert/--tls-key: give both or neither")
	}
	if o.clientCA != "" && o.tlsCert == "" {
		return nil, usagef("invalid --client-ca: client certificates need TLS: give --tls-cert and --tls-key")
	}
	if authn != nil && authn.HasCertificates() && o.clientCA == "" {
		return nil, usagef("invalid --auth: a principal is identified by a client certificate: give --client-ca to verify them")
	}
	if o.tlsCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
	if err != nil {
		return nil, usagef("invalid --tls-cert/--tls-key: %v", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if o.clientCA != "" {
		pem, err := os.ReadFile(o.clientCA)
		if err != nil {
			return nil, usagef("invalid --client-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usagef("invalid --client-ca %q: no PEM certificate in it", o.clientCA)
		}
		// Bearer-token callers connect without a certificate; one that
		// presents a certificate must present a valid one.
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

func newServeTokenCmd() *cobra.Command {
	var name, verbs, dims, expires string
	cmd := &cobra.Command{
		Use:   "token --name NAME --verbs acquire,settle --dimensions 'openai#*'",
		Short: "Make a bearer token and the entry of the --auth file that accepts it",
		Long: `Token prints a fresh bearer token, once, and the entry to add to the
--auth file of sluice serve: the file keeps only the token's SHA-256, so a
leaked file leaks no token. Verbs: acquire, settle, observe, read, admin.
Dimension patterns: "*" matches any run of characters.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return usagef("invalid --name: required")
			}
			entry := fmt.Sprintf("principals:\n  - name: %q\n    token_sha256: %%s\n    verbs: [%s]\n    dimensions: [%s]\n", name, verbs, quoteList(dims))
			if expires != "" {
				t, err := time.Parse(time.RFC3339, expires)
				if err != nil {
					return usagef("invalid --expires %q: an RFC 3339 time such as 2027-01-31T00:00:00Z", expires)
				}
				entry += fmt.Sprintf("    expires: %s\n", t.UTC().Format(time.RFC3339))
			}
			token, hash := auth.NewToken()
			// Check the entry the way serve will read it.
			if _, err := auth.Parse("entry", []byte(fmt.Sprintf(entry, hash))); err != nil {
				return usagef("%v", err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "token (give it to %s; it is not shown again): %s\n\n", name, token)
			fmt.Fprintf(out, "entry for the --auth file:\n"+entry, hash)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "the principal's name (lease records and logs show it)")
	f.StringVar(&verbs, "verbs", "acquire,settle,observe", "comma-separated verbs: acquire, settle, observe, read, admin")
	f.StringVar(&dims, "dimensions", "*", "comma-separated dimension patterns")
	f.StringVar(&expires, "expires", "", "when the token stops working (RFC 3339)")
	return cmd
}

// quoteList quotes each item of a comma-separated list for YAML.
func quoteList(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = fmt.Sprintf("%q", strings.TrimSpace(p))
	}
	return strings.Join(parts, ", ")
}
