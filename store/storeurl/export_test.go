package storeurl

import "net/url"

// Parse is parse with every store's scheme, for the external tests.
func Parse(raw string) (*url.URL, error) {
	return parse(raw, []string{"memory", "redis", "rediss", "redis+cluster", "rediss+cluster", "postgres", "postgresql", "dynamodb"})
}

// IsSecret is isSecret, for the external tests.
func IsSecret(key string) bool { return isSecret(key) }
