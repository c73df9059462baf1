// Package testserver defines the shape shared by the test-server helpers
// (internal/redistest, internal/pgtest, internal/testing/ddbtest), so that a fault
// test can kill, freeze and restart any store's server the same way.
package testserver

// Server is a store's server started by a test on a loopback port.
type Server interface {
	// Address is where clients connect: a host:port for Redis, a
	// connection URL for PostgreSQL, an endpoint URL for DynamoDB Local.
	Address() string
	// Kill stops the server without a clean shutdown and waits for it to
	// exit. What survives depends on the server's persistence.
	Kill() error
	// Restart starts a killed server again on the same port.
	Restart() error
	// Stop freezes the server (SIGSTOP): connections stay open and nothing
	// answers, as with a hung host.
	Stop() error
	// Cont resumes a server frozen by Stop (SIGCONT).
	Cont() error
	// Close kills the server and removes what it wrote.
	Close() error
}
