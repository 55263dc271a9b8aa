package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

func batchKeys(dir string, from, to int64) []string {
	var keys []string
	for b := from; b < to; b++ {
		keys = append(keys, dir+checkpoint.BatchName(b))
	}
	return keys
}

func list(t *testing.T, s checkpoint.Store, prefix string) []string {
	t.Helper()
	keys, err := checkpoint.ListKeys(t.Context(), s, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func TestPurgeKeepsTheRetentionWindow(t *testing.T) {
	d := newDir(t)
	c := claim(t, d)
	runBatches(t, c, 0, 250)
	if err := c.AddOffsets(t.Context(), offsets(250)); err != nil { // planned, not committed
		t.Fatal(err)
	}
	for _, b := range []int64{0, 120, 200} {
		if err := c.RecordShape(t.Context(), b, fmt.Appendf(nil, `{"from":%d}`, b)); err != nil {
			t.Fatal(err)
		}
	}
	oldest, err := c.Purge(t.Context(), checkpoint.DefaultMinBatchesToRetain)
	if err != nil {
		t.Fatal(err)
	}
	if oldest != 150 {
		t.Errorf("Purge(100) oldest = %d, want 150 (the newest 100 committed batches)", oldest)
	}
	if diff := cmp.Diff(batchKeys("offsets/", 150, 251), list(t, d, "offsets/")); diff != "" {
		t.Errorf("offsets after Purge (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(batchKeys("commits/", 150, 250), list(t, d, "commits/")); diff != "" {
		t.Errorf("commits after Purge (-want +got):\n%s", diff)
	}
	// Shape 120 is in force at batch 150: kept. Shape 0 is not.
	if diff := cmp.Diff([]string{"shape/00000000000000000120", "shape/00000000000000000200"}, list(t, d, "shape/")); diff != "" {
		t.Errorf("shapes after Purge (-want +got):\n%s", diff)
	}
	if p, cm, r, n := headOf(t, c); p != 250 || cm != 249 || !r || n != 250 {
		t.Errorf("Head after Purge = %d %d %v %d, want 250 249 true 250", p, cm, r, n)
	}
	if from, _, err := c.Shape(t.Context(), 150); err != nil || from != 120 {
		t.Errorf("Shape(150) after Purge = %d, %v; want 120", from, err)
	}
	if oldest, err := c.Purge(t.Context(), 100); err != nil || oldest != 150 {
		t.Errorf("second Purge = %d, %v; want 150 and nothing more to do", oldest, err)
	}
}

func TestPurgeNeverBreaksRecovery(t *testing.T) {
	for _, retain := range []int{1, 2, 5} {
		for _, planned := range []bool{false, true} {
			t.Run(fmt.Sprintf("retain=%d/replay=%v", retain, planned), func(t *testing.T) {
				c := claim(t, newDir(t))
				runBatches(t, c, 0, 10)
				if planned {
					c.AddOffsets(t.Context(), offsets(10))
				}
				p0, c0, r0, n0 := headOf(t, c)
				if _, err := c.Purge(t.Context(), retain); err != nil {
					t.Fatal(err)
				}
				if p, cm, r, n := headOf(t, c); p != p0 || cm != c0 || r != r0 || n != n0 {
					t.Errorf("Head after Purge(%d) = %d %d %v %d, want %d %d %v %d", retain, p, cm, r, n, p0, c0, r0, n0)
				}
				if _, err := c.Offsets(t.Context(), n0-1); err != nil {
					t.Errorf("Purge(%d) removed the offsets of the newest committed batch: %v", retain, err)
				}
			})
		}
	}
	if _, err := claim(t, newDir(t)).Purge(t.Context(), 0); err == nil {
		t.Error("Purge(0) error = nil, want an error")
	}
}

// failingDeletes fails every Delete after the first n.
type failingDeletes struct {
	checkpoint.Store
	n int
}

func (s *failingDeletes) Delete(ctx context.Context, key string) error {
	if s.n == 0 {
		return errors.New("injected failure")
	}
	s.n--
	return s.Store.Delete(ctx, key)
}

func TestInterruptedPurgeKeepsRecoveryPossible(t *testing.T) {
	for _, n := range []int{0, 1, 5, 25, 45, 55} {
		t.Run(fmt.Sprint(n, " deletes"), func(t *testing.T) {
			d := newDir(t)
			c := claim(t, d)
			runBatches(t, c, 0, 40)
			c.AddOffsets(t.Context(), offsets(40))
			for _, b := range []int64{0, 10, 20, 30} {
				c.RecordShape(t.Context(), b, []byte(`{}`))
			}
			interrupted := claim(t, &failingDeletes{Store: d, n: n})
			if _, err := interrupted.Purge(t.Context(), 10); err == nil {
				t.Fatal("Purge with failing deletes error = nil")
			}
			if p, cm, r, n := headOf(t, c); p != 40 || cm != 39 || !r || n != 40 {
				t.Errorf("Head after an interrupted Purge = %d %d %v %d, want 40 39 true 40", p, cm, r, n)
			}
			// Every log is still a contiguous run of the newest entries.
			for _, dir := range []string{"offsets/", "commits/"} {
				keys := list(t, d, dir)
				first, _ := checkpoint.ParseBatchName(keys[0][len(dir):])
				last := int64(40)
				if dir == "commits/" {
					last = 39
				}
				if diff := cmp.Diff(batchKeys(dir, first, last+1), keys); diff != "" {
					t.Errorf("%s has a hole after an interrupted Purge (-want +got):\n%s", dir, diff)
				}
			}
			if from, _, err := c.Shape(t.Context(), 40); err != nil || from != 30 {
				t.Errorf("Shape(40) after an interrupted Purge = %d, %v; want 30", from, err)
			}
			if oldest, err := c.Purge(t.Context(), 10); err != nil || oldest != 30 {
				t.Errorf("Purge after the interrupted one = %d, %v; want 30", oldest, err)
			}
			if got := list(t, d, "offsets/"); len(got) != 11 {
				t.Errorf("after the second Purge %d offsets entries remain, want 11", len(got))
			}
		})
	}
}

func TestPurgeCallsItsFuncsWithTheOldestBatch(t *testing.T) {
	c := claim(t, newDir(t))
	runBatches(t, c, 0, 20)
	var got []int64
	oldest, err := c.Purge(t.Context(), 5, func(_ context.Context, s checkpoint.Store, oldest int64) error {
		if s != c.Store() {
			t.Errorf("PurgeFunc got store %v, want the checkpoint's", s)
		}
		got = append(got, oldest)
		return nil
	}, func(context.Context, checkpoint.Store, int64) error { return errors.New("source gone") })
	if err == nil {
		t.Error("Purge with a failing PurgeFunc error = nil")
	}
	if !slices.Equal(got, []int64{15}) || oldest != 0 {
		t.Errorf("PurgeFunc got %v (Purge returned %d), want [15]", got, oldest)
	}
}

func TestPurgeState(t *testing.T) {
	d := newDir(t)
	files := []checkpoint.StateFile{}
	for part := range 2 {
		for v := int64(1); v <= 12; v++ {
			files = append(files, checkpoint.StateFile{Operator: "revenue", Partition: part, Version: v, Kind: checkpoint.StateDelta})
			if v%5 == 0 && part == 0 { // partition 1 never snapshots
				files = append(files, checkpoint.StateFile{Operator: "revenue", Partition: part, Version: v, Kind: checkpoint.StateSnapshot})
			}
		}
	}
	for _, f := range files {
		if err := d.Create(t.Context(), f.Key(), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	write(t, d, checkpoint.StateMetadataKey("revenue"), `{"operator":"aggregate"}`)
	if err := checkpoint.PurgeState(t.Context(), d, 11); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		// Partition 0: the newest snapshot at or before 11 is 10; partition 1 keeps everything.
		if f.Partition == 1 || f.Version >= 10 {
			want = append(want, f.Key())
		}
	}
	want = append(want, checkpoint.StateMetadataKey("revenue"))
	slices.Sort(want)
	if diff := cmp.Diff(want, list(t, d, "state/")); diff != "" {
		t.Errorf("state files after PurgeState(11) (-want +got):\n%s", diff)
	}
}

func TestPurgeSource(t *testing.T) {
	d := newDir(t)
	for b := range int64(6) {
		write(t, d, checkpoint.SourceKey("landing", checkpoint.BatchName(b)), "files")
	}
	write(t, d, checkpoint.SourceKey("landing", "initial"), "{}")
	if err := checkpoint.PurgeSource("landing")(t.Context(), d, 4); err != nil {
		t.Fatal(err)
	}
	want := []string{"sources/landing/00000000000000000004", "sources/landing/00000000000000000005", "sources/landing/initial"}
	if diff := cmp.Diff(want, list(t, d, "sources/")); diff != "" {
		t.Errorf("source files after PurgeSource (-want +got):\n%s", diff)
	}
}
