package auth

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// file is the configuration's YAML form.
type file struct {
	Principals []struct {
		Name        string    `yaml:"name"`
		TokenSHA256 string    `yaml:"token_sha256"`
		ClientCert  *certRef  `yaml:"client_cert"`
		Verbs       []Verb    `yaml:"verbs"`
		Dimensions  []string  `yaml:"dimensions"`
		Expires     time.Time `yaml:"expires"`
	} `yaml:"principals"`
}

type certRef struct {
	CommonName string `yaml:"common_name"`
	DNSName    string `yaml:"dns_name"`
}

// Load reads and parses an authentication file.
func Load(path string) (*Authenticator, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	return Parse(path, data)
}

// Parse parses an authentication file; name is the file's name, for
// errors, each of which names the principal and the field. Unknown fields
// are errors, and so is a token written in clear instead of its hash.
func Parse(name string, data []byte) (*Authenticator, error) {
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("auth: %s: %w", name, err)
	}
	if len(f.Principals) == 0 {
		return nil, fmt.Errorf("auth: %s: principals: at least one is required", name)
	}
	a := &Authenticator{now: time.Now}
	seen := map[string]bool{}
	for i, fp := range f.Principals {
		at := fmt.Sprintf("auth: %s: principals[%d]", name, i)
		if fp.Name == "" {
			return nil, fmt.Errorf("%s.name: required", at)
		}
		if seen[fp.Name] {
			return nil, fmt.Errorf("%s.name %q: another principal has it", at, fp.Name)
		}
		seen[fp.Name] = true
		p := &Principal{Name: fp.Name, Verbs: fp.Verbs, Dimensions: fp.Dimensions, Expires: fp.Expires}
		switch {
		case fp.TokenSHA256 != "" && fp.ClientCert != nil:
			return nil, fmt.Errorf("%s (%s): give token_sha256 or client_cert, not both", at, fp.Name)
		case fp.TokenSHA256 != "":
			h, err := hex.DecodeString(fp.TokenSHA256)
			if err != nil || len(h) != 32 {
				why := "must be the 64 hex digits of the token's SHA-256 (sluice serve token prints it)"
				if strings.HasPrefix(fp.TokenSHA256, "slc_") {
					why = "is a token, not its hash: keep the token secret and write its SHA-256 (sluice serve token prints it)"
				}
				return nil, fmt.Errorf("%s.token_sha256 (%s): %s", at, fp.Name, why)
			}
			p.tokenHash = h
		case fp.ClientCert != nil:
			if fp.ClientCert.CommonName == "" && fp.ClientCert.DNSName == "" {
				return nil, fmt.Errorf("%s.client_cert (%s): give common_name or dns_name", at, fp.Name)
			}
			p.certCN, p.certDNS = fp.ClientCert.CommonName, fp.ClientCert.DNSName
		default:
			return nil, fmt.Errorf("%s (%s): give token_sha256 or client_cert", at, fp.Name)
		}
		if len(p.Verbs) == 0 {
			return nil, fmt.Errorf("%s.verbs (%s): at least one of acquire, settle, observe, read, admin", at, fp.Name)
		}
		for _, v := range p.Verbs {
			if !verbs[v] {
				return nil, fmt.Errorf("%s.verbs (%s): %q is not acquire, settle, observe, read or admin", at, fp.Name, v)
			}
		}
		if len(p.Dimensions) == 0 {
			return nil, fmt.Errorf("%s.dimensions (%s): at least one pattern (\"*\" for every dimension)", at, fp.Name)
		}
		for _, d := range p.Dimensions {
			if d == "" {
				return nil, fmt.Errorf("%s.dimensions (%s): an empty pattern", at, fp.Name)
			}
		}
		a.principals = append(a.principals, p)
	}
	return a, nil
}
