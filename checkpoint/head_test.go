package checkpoint_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

// headOf returns (planned, committed, replay, next) with -1 for a nil entry.
func headOf(t *testing.T, c *checkpoint.Checkpoint) (planned, committed int64, replay bool, next int64) {
	t.Helper()
	h, err := c.Head(t.Context())
	if err != nil {
		t.Fatalf("Head error = %v", err)
	}
	planned, committed = -1, -1
	if h.Planned != nil {
		planned = h.Planned.BatchID
	}
	if h.Committed != nil {
		committed = h.Committed.BatchID
	}
	return planned, committed, h.Replay(), h.Next()
}

func TestHead(t *testing.T) {
	type want struct {
		planned, committed int64
		replay             bool
		next               int64
	}
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, c *checkpoint.Checkpoint)
		want   want
		hints  bool // the case is also checked with a missing and a stale hint
		purged bool
	}{
		{"new checkpoint", func(*testing.T, *checkpoint.Checkpoint) {}, want{-1, -1, false, 0}, false, false},
		{"first batch planned", func(t *testing.T, c *checkpoint.Checkpoint) {
			c.AddOffsets(t.Context(), offsets(0))
		}, want{0, -1, true, 0}, false, false},
		{"first batch committed", func(t *testing.T, c *checkpoint.Checkpoint) {
			runBatches(t, c, 0, 1)
		}, want{0, 0, false, 1}, true, false},
		{"C == L: plan the next batch", func(t *testing.T, c *checkpoint.Checkpoint) {
			runBatches(t, c, 0, 30)
		}, want{29, 29, false, 30}, true, false},
		{"C == L-1: replay L", func(t *testing.T, c *checkpoint.Checkpoint) {
			runBatches(t, c, 0, 30)
			c.AddOffsets(t.Context(), offsets(30))
		}, want{30, 29, true, 30}, true, false},
		{"after a purge", func(t *testing.T, c *checkpoint.Checkpoint) {
			runBatches(t, c, 0, 30)
			c.AddOffsets(t.Context(), offsets(30))
			if _, err := c.Purge(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
		}, want{30, 29, true, 30}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDir(t)
			c := claim(t, d)
			tc.setup(t, c)
			check := func(how string) {
				t.Helper()
				p, cm, r, n := headOf(t, c) // starts from what c wrote
				if got := (want{p, cm, r, n}); got != tc.want {
					t.Errorf("%s: writer's Head = planned %d committed %d replay %v next %d; want %+v", how, p, cm, r, n, tc.want)
				}
				fresh, err := checkpoint.Load(t.Context(), d) // starts from the hint, as a restart does
				if err != nil {
					t.Fatal(err)
				}
				p, cm, r, n = headOf(t, fresh)
				if got := (want{p, cm, r, n}); got != tc.want {
					t.Errorf("%s: Head = planned %d committed %d replay %v next %d; want %+v", how, p, cm, r, n, tc.want)
				}
			}
			check("with the hint")
			if !tc.hints {
				return
			}
			write(t, d, "_latest", `{"commit":0}`+"\n") // stale: a hint only ever lags
			check("with a stale hint")
			write(t, d, "_latest", `{"commit":3}`+"\n") // beyond the probe limit, maybe purged
			check("with an old hint")
			write(t, d, "_latest", "garbage")
			check("with a damaged hint")
			if err := d.Delete(t.Context(), "_latest"); err != nil {
				t.Fatal(err)
			}
			check("without a hint")
		})
	}
}

func TestHeadRefusesContradictoryLogs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, d *checkpoint.Dir, c *checkpoint.Checkpoint)
		names string
	}{
		{"commit without offsets", func(t *testing.T, d *checkpoint.Dir, c *checkpoint.Checkpoint) {
			c.AddCommit(t.Context(), commit(0))
		}, "commits/00000000000000000000"},
		{"commit ahead of offsets", func(t *testing.T, d *checkpoint.Dir, c *checkpoint.Checkpoint) {
			runBatches(t, c, 0, 3)
			c.AddCommit(t.Context(), commit(3))
		}, "commits/00000000000000000003"},
		{"uncommitted batch before the newest", func(t *testing.T, d *checkpoint.Dir, c *checkpoint.Checkpoint) {
			runBatches(t, c, 0, 3)
			c.AddOffsets(t.Context(), offsets(3))
			c.AddOffsets(t.Context(), offsets(4))
		}, "commits/00000000000000000003"},
		{"deleted commit", func(t *testing.T, d *checkpoint.Dir, c *checkpoint.Checkpoint) {
			runBatches(t, c, 0, 3)
			c.AddOffsets(t.Context(), offsets(3))
			d.Delete(t.Context(), "commits/00000000000000000002")
			d.Delete(t.Context(), "commits/00000000000000000001")
		}, "offsets/00000000000000000003"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDir(t)
			c := claim(t, d)
			tc.setup(t, d, c)
			_, err := c.Head(t.Context())
			if !errors.Is(err, checkpoint.ErrDamaged) || !strings.Contains(err.Error(), tc.names) {
				t.Errorf("Head error = %v, want ErrDamaged naming %s", err, tc.names)
			}
		})
	}
}

// A user who deletes the newest commit by hand (to make the query re-run a
// batch) gets that batch replayed, whatever the hint says.
func TestHeadAfterTheNewestCommitWasDeleted(t *testing.T) {
	d := newDir(t)
	c := claim(t, d)
	runBatches(t, c, 0, 5)
	if err := d.Delete(t.Context(), "commits/00000000000000000004"); err != nil {
		t.Fatal(err)
	}
	if p, cm, r, n := headOf(t, c); p != 4 || cm != 3 || !r || n != 4 {
		t.Errorf("Head = planned %d committed %d replay %v next %d; want 4 3 true 4", p, cm, r, n)
	}
}

// The newest-batch lookup reads a fixed handful of objects and lists nothing,
// however many batches are retained: from the writer that knows where it
// is, and from a restarted process that starts from the hint.
func TestHeadCostDoesNotGrowWithRetainedBatches(t *testing.T) {
	costs := map[string][]int64{}
	for _, retained := range []int64{12, 1000} { // the hint lags by 3 in both
		d := newDir(t)
		cs := &countingStore{Store: d}
		writer := claim(t, cs)
		runBatches(t, writer, 0, 1)
		copyBatches(t, d, 1, retained-1)
		runBatches(t, writer, retained-1, retained)
		// The hint as AddCommit leaves it, every HintInterval batches.
		write(t, d, "_latest", fmt.Sprintf(`{"commit":%d}`, (retained-1)/checkpoint.HintInterval*checkpoint.HintInterval))
		if err := writer.AddOffsets(t.Context(), offsets(retained)); err != nil {
			t.Fatal(err)
		}
		restarted, err := checkpoint.Load(t.Context(), cs)
		if err != nil {
			t.Fatal(err)
		}
		for name, c := range map[string]*checkpoint.Checkpoint{"writer": writer, "restarted": restarted} {
			cs.gets.Store(0)
			cs.lists.Store(0)
			if p, cm, _, _ := headOf(t, c); p != retained || cm != retained-1 {
				t.Fatalf("retained %d: Head = %d, %d", retained, p, cm)
			}
			if n := cs.lists.Load(); n != 0 {
				t.Errorf("retained %d: %s's Head listed %d times, want 0", retained, name, n)
			}
			costs[name] = append(costs[name], cs.gets.Load())
		}
	}
	// writer: commits and offsets 11 to 13.
	// restarted: the hint (8); commits and offsets 8 to 13.
	for name, want := range map[string]int64{"writer": 6, "restarted": 13} {
		if got := costs[name]; got[0] != want || got[1] != want {
			t.Errorf("%s's Head read %d objects at 12 batches and %d at 1000; want %d", name, got[0], got[1], want)
		}
	}
}

// copyBatches fills the logs with copies of batch 0 for batches [from, to),
// bypassing the store's fsyncs to keep tests fast.
func copyBatches(t *testing.T, d *checkpoint.Dir, from, to int64) {
	t.Helper()
	for _, key := range []func(int64) string{checkpoint.OffsetsKey, checkpoint.CommitKey} {
		data, err := os.ReadFile(filepath.Join(d.Location(), key(0)))
		if err != nil {
			t.Fatal(err)
		}
		for b := from; b < to; b++ {
			if err := os.WriteFile(filepath.Join(d.Location(), key(b)), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// hintOf renders the hint AddCommit writes after batch b of runBatches.
func hintOf(b int64) string {
	return fmt.Sprintf(`{"commit":%d,"batchTimestampMs":%d,"batchWatermarkMs":%d}`, b, 1_777_000_000_000+b, 1000*b)
}

func TestCommitsUpdateTheHint(t *testing.T) {
	d := newDir(t)
	c := claim(t, d) // its clock stands still: only HintInterval moves the hint
	for b, want := range []int64{0, 0, 0, 0, 4, 4} {
		runBatches(t, c, int64(b), int64(b)+1)
		got, err := d.Get(t.Context(), "_latest")
		if err != nil || strings.TrimSpace(string(got)) != hintOf(want) {
			t.Errorf("after batch %d the hint is %q, %v; want %s", b, got, err, hintOf(want))
		}
	}
}

// A writer rewrites the hint every HintInterval batches, and also whenever
// HintMaxAge passed since it last did: a query whose batches are that far
// apart always has an exact hint; a busy one pays no more overwrites than
// before. A restarted writer writes it at its first commit. Whatever the
// hint, Head from it finds the newest entries.
func TestHintFollowsTheClock(t *testing.T) {
	for _, tc := range []struct {
		name  string
		every time.Duration // between commits
		want  []int64       // the hint after batches 0, 1, ...
	}{
		{"busy", 100 * time.Millisecond, []int64{0, 0, 0, 0, 4, 4, 4, 4, 8, 8}},
		{"a commit every 400ms", 400 * time.Millisecond, []int64{0, 0, 0, 3, 4, 4, 4, 7, 8, 8}},
		{"a commit every 600ms", 600 * time.Millisecond, []int64{0, 0, 2, 2, 4, 4, 6, 6, 8, 8}},
		{"slow", checkpoint.HintMaxAge, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDir(t)
			now := created
			c := claim(t, d, checkpoint.WithClock(func() time.Time { return now }))
			check := func(c *checkpoint.Checkpoint, b, want int64) {
				t.Helper()
				got, err := c.LatestHint(t.Context())
				if err != nil {
					t.Fatalf("after batch %d: LatestHint error = %v", b, err)
				}
				data, _ := json.Marshal(got)
				if string(data) != hintOf(want) {
					t.Errorf("after batch %d the hint is %s; want %s", b, data, hintOf(want))
				}
				fresh, err := checkpoint.Load(t.Context(), d)
				if err != nil {
					t.Fatal(err)
				}
				if p, cm, _, _ := headOf(t, fresh); p != b || cm != b {
					t.Errorf("after batch %d: Head from the hint = planned %d committed %d", b, p, cm)
				}
			}
			for b, want := range tc.want {
				runBatches(t, c, int64(b), int64(b)+1)
				check(c, int64(b), want)
				now = now.Add(tc.every)
			}
			// A restarted writer: the hint is written at its first commit,
			// with the timestamp and watermark of the batch it replays.
			n := int64(len(tc.want))
			if err := c.AddOffsets(t.Context(), offsets(n)); err != nil {
				t.Fatal(err)
			}
			restarted := claim(t, d, checkpoint.WithClock(func() time.Time { return now }))
			if h, err := restarted.Head(t.Context()); err != nil || !h.Replay() {
				t.Fatalf("restarted Head = %+v, %v; want batch %d replayed", h, err, n)
			}
			if err := restarted.AddCommit(t.Context(), commit(n)); err != nil {
				t.Fatal(err)
			}
			check(restarted, n, n)
		})
	}
}

func TestLatestHint(t *testing.T) {
	d := newDir(t)
	c := claim(t, d)
	if _, err := c.LatestHint(t.Context()); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("LatestHint of a new checkpoint: error = %v, want ErrNotFound", err)
	}
	write(t, d, "_latest", `{"commit":12}`+"\n") // as Lockstep wrote it before the timestamp and watermark
	if h, err := c.LatestHint(t.Context()); err != nil || h.Commit != 12 || h.BatchTimestampMs != nil || h.BatchWatermarkMs != nil {
		t.Errorf("LatestHint = %+v, %v; want commit 12 without timestamp and watermark", h, err)
	}
	for _, damaged := range []string{"garbage", `{"commit":-1}`, `{"commit":3,"batchTimestampMs":5}`} {
		write(t, d, "_latest", damaged)
		if _, err := c.LatestHint(t.Context()); !errors.Is(err, checkpoint.ErrDamaged) || !strings.Contains(err.Error(), "_latest") {
			t.Errorf("LatestHint of %s: error = %v, want ErrDamaged naming _latest", damaged, err)
		}
	}
}
