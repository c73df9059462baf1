package envoyrls

import "time"

// CurrentLimit exposes currentLimit to the tests.
var CurrentLimit = currentLimit

// SetNow sets the server's clock.
func SetNow(s *Server, now func() time.Time) { s.now = now }
