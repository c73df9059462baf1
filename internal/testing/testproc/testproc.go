// Package testproc holds the operating-system specific parts of the test
// helpers that run real servers (internal/redistest, internal/pgtest,
// internal/testing/ddbtest): starting a server in its own process group, tied to
// the test binary's life, and freezing, continuing or killing it.
//
// On Linux a server is killed with the test binary even when the binary
// crashes (the parent-death signal). Other Unix systems have no such
// signal: a crashed test binary may leave its servers running, and
// Children finds nothing, so Crash-style helpers reach only the process
// they started. On other systems (Windows) only Kill works (Terminate kills
// too); Stop, Continue and the group functions report
// errors.ErrUnsupported. The tests themselves run on
// Linux in CI; the fallbacks exist so that every package builds and vets
// everywhere.
package testproc

// Credential names the user and group a server runs as.
type Credential struct {
	// Uid is the numeric user id.
	Uid uint32
	// Gid is the numeric group id.
	Gid uint32
}

// Attr says how a server process is started.
type Attr struct {
	// Cred, when non-nil, runs the process as that user (Unix only).
	Cred *Credential
	// Group starts the process in a new process group of its own.
	Group bool
	// DieWithParent kills the process when the test binary exits, where
	// the system can do it (Linux).
	DieWithParent bool
}
