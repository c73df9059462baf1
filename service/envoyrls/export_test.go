package envoyrls

// CurrentLimit exposes currentLimit to the tests.
var CurrentLimit = currentLimit
