package limits

import (
	"strings"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/vendors"
)

// Profiles returns the vendor profile of every preset in the file, in file
// order, with the dimension names and maximum debt the file gives them:
// what a client of the vendor's API (such as vendors/transport) needs to
// compute admission charges and settlements on the file's buckets. A
// profile's Scope is the preset's model or deployment, empty when it has
// none. Dimensions declared one by one have no profile.
func (f *File) Profiles() []vendors.Profile {
	out := make([]vendors.Profile, len(f.profiles))
	for i, p := range f.profiles {
		p.Dimensions = append([]vendors.Dimension(nil), p.Dimensions...)
		out[i] = p
	}
	return out
}

// fileProfile renames prof's dimensions to the file's prefix
// (vendor[#scope], or the preset's vendor: override) and applies the
// file's max_debt to its token dimensions, as addProfile does to the
// buckets.
func fileProfile(prof vendors.Profile, prefix string, maxDebt int64) vendors.Profile {
	if _, scope, ok := strings.Cut(prefix, "#"); ok {
		prof.Scope = scope
	}
	dims := make([]vendors.Dimension, len(prof.Dimensions))
	for i, d := range prof.Dimensions {
		d.Name = prefix + "#" + vendors.Suffix(d.Metric)
		if d.Config.Type == bucket.Tokens {
			d.Config.MaxDebt = maxDebt
		}
		dims[i] = d
	}
	prof.Dimensions = dims
	return prof
}
