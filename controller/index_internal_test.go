package controller

import (
	"slices"
	"testing"
)

// The index finds exactly the locations Overlaps says overlap: every pair of a set of
// locations, equal, nested either way, siblings and prefixes that are not folders.
func TestLocationKeysFindWhatOverlaps(t *testing.T) {
	locs := []string{"s3://b/team/q", "s3://b/team/q/", "s3://b/team", "s3://b/team/q/sub", "s3://b/team/qq",
		"s3://b/other/q", "s3://b", "s3://c/team/q", "s3://b/team/q2/x"}
	for _, a := range locs {
		lookups := lookupKeys(a)
		for _, b := range locs {
			found := false
			for _, k := range locationKeys(b) {
				found = found || slices.Contains(lookups, k)
			}
			if found != Overlaps(a, b) {
				t.Errorf("%s vs %s: index finds %v, Overlaps says %v", a, b, found, Overlaps(a, b))
			}
		}
	}
}
