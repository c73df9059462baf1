// Package frontdoor holds no code: its test keeps every caller in the
// module, outside package sluice and the store drivers, going through
// *sluice.Client instead of calling store operations directly.
package frontdoor
