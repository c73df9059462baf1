// Package history records what a fleet's Clients and Transports did, per
// dimension and caller, for an operator to read: grants, refusals, waits,
// degraded grants, errors, tokens reserved and settled, debt, vendor
// responses by class (429s by the limit they name), the lowest remaining
// value vendors reported, and calls sent unmetered.
//
// A Recorder keeps a live view of the last 15 minutes, second by second,
// in memory, and writes per-minute and per-hour totals to the store the
// fleet already shares, when it keeps usage history (store.Usager: the
// memory, Redis, PostgreSQL and DynamoDB stores). Each process writes its
// own rows, absolute totals under its own writer id, so that a write sent
// twice changes nothing and two processes never overwrite each other;
// Query sums the rows of every process. A process writes at most once per
// flush interval (10 s) per dimension it saw activity on.
//
// Wire it to a Client and run its flush loop:
//
//	rec, err := history.New(st)
//	client, err := sluice.New(st, sluice.WithObserver(rec.Observer()))
//	go rec.Run(ctx)
//
// See docs/history.md for what is recorded, retention, and costs.
package history
