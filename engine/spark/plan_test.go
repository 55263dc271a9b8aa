package spark_test

import (
	"testing"

	"github.com/lockstep-dev/lockstep/engine/spark"
)

// TestMergeCondition: the Delta MERGE condition the runner runs is compiled in Go: each key
// null-safely equal, quoted; a global aggregate's is true.
func TestMergeCondition(t *testing.T) {
	for _, tc := range []struct {
		keys []string
		want string
	}{
		{nil, "true"},
		{[]string{"window_start", "odd`name"}, "t.`window_start` <=> s.`window_start` AND t.`odd``name` <=> s.`odd``name`"},
	} {
		if got := spark.MergeCondition(tc.keys); got != tc.want {
			t.Errorf("MergeCondition(%q) = %q, want %q", tc.keys, got, tc.want)
		}
	}
}
