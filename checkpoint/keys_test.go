package checkpoint_test

import (
	"testing"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

func TestBatchNamesSortNumerically(t *testing.T) {
	batches := []int64{0, 1, 9, 10, 99, 100, 12345, 1<<63 - 1}
	for i, b := range batches {
		name := checkpoint.BatchName(b)
		if len(name) != 20 {
			t.Errorf("BatchName(%d) = %q, want 20 digits", b, name)
		}
		if got, ok := checkpoint.ParseBatchName(name); !ok || got != b {
			t.Errorf("ParseBatchName(%q) = %d, %v; want %d", name, got, ok, b)
		}
		if i > 0 && checkpoint.BatchName(batches[i-1]) >= name {
			t.Errorf("BatchName(%d) does not sort before BatchName(%d)", batches[i-1], b)
		}
	}
	for _, bad := range []string{"", "1", "0000000000000000000x", "-0000000000000000001", "000000000000000000001", "99999999999999999999"} {
		if n, ok := checkpoint.ParseBatchName(bad); ok {
			t.Errorf("ParseBatchName(%q) = %d, true; want false", bad, n)
		}
	}
}

func TestKeys(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{checkpoint.OffsetsKey(7), "offsets/00000000000000000007"},
		{checkpoint.CommitKey(7), "commits/00000000000000000007"},
		{checkpoint.ShapeKey(0), "shape/00000000000000000000"},
		{checkpoint.SourceKey("orders", "initial"), "sources/orders/initial"},
		{checkpoint.StateMetadataKey("revenue"), "state/revenue/_metadata"},
		{checkpoint.StateFile{Operator: "revenue", Partition: 3, Version: 42, Kind: checkpoint.StateDelta}.Key(), "state/revenue/3/00000000000000000042.delta"},
		{checkpoint.StateFile{Operator: "0", Partition: 0, Version: 5, Kind: checkpoint.StateSnapshot}.Key(), "state/0/0/00000000000000000005.snapshot"},
	} {
		if tc.got != tc.want {
			t.Errorf("key = %q, want %q", tc.got, tc.want)
		}
		if !checkpoint.ValidKey(tc.got) {
			t.Errorf("ValidKey(%q) = false", tc.got)
		}
	}
}

func TestParseStateFile(t *testing.T) {
	f := checkpoint.StateFile{Operator: "dedup", Partition: 12, Version: 3, Kind: checkpoint.StateSnapshot}
	if got, ok := checkpoint.ParseStateFile(f.Key()); !ok || got != f {
		t.Errorf("ParseStateFile(%q) = %+v, %v; want %+v", f.Key(), got, ok, f)
	}
	for _, key := range []string{
		"state/dedup/_metadata",
		"state/dedup/12/00000000000000000003.json",
		"state/dedup/012/00000000000000000003.delta",
		"state/dedup/x/00000000000000000003.delta",
		"state/dedup/12/3.delta",
		"state//12/00000000000000000003.delta",
		"offsets/00000000000000000003",
	} {
		if got, ok := checkpoint.ParseStateFile(key); ok {
			t.Errorf("ParseStateFile(%q) = %+v, true; want false", key, got)
		}
	}
}
