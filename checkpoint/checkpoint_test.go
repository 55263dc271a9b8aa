package checkpoint_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/storetest"
)

var (
	owner   = checkpoint.Owner{Namespace: "payments", Name: "revenue-by-country", UID: "0b9c4c1e-1111-2222-3333-444455556666"}
	created = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
)

func claim(t testing.TB, s checkpoint.Store, opts ...checkpoint.ClaimOption) *checkpoint.Checkpoint {
	t.Helper()
	c, err := checkpoint.Claim(t.Context(), s, owner, append([]checkpoint.ClaimOption{checkpoint.WithClock(func() time.Time { return created })}, opts...)...)
	if err != nil {
		t.Fatalf("Claim error = %v", err)
	}
	return c
}

func offsets(batch int64) checkpoint.Offsets {
	return checkpoint.Offsets{
		BatchID:          batch,
		BatchWatermarkMs: 1000 * batch,
		BatchTimestampMs: 1_777_000_000_000 + batch,
		Conf:             map[string]string{"lockstep.stateStore.partitions": "8"},
		Sources: []checkpoint.SourceOffset{
			{Source: "orders", Offset: json.RawMessage(fmt.Sprintf(`{"orders":{"0":%d,"1":%d}}`, 10*batch, 20*batch))},
			{Source: "refunds", Offset: json.RawMessage(fmt.Sprintf(`{"logOffset":%d}`, batch))},
		},
	}
}

func commit(batch int64) checkpoint.Commit {
	lag := int64(7)
	return checkpoint.Commit{
		BatchID:              batch,
		NextBatchWatermarkMs: 1000*batch + 500,
		Progress: checkpoint.Progress{
			Timestamp:     created.Add(time.Duration(batch) * time.Minute),
			NumInputRows:  100 + batch,
			NumOutputRows: 10 + batch,
			DurationMs:    map[string]int64{"triggerExecution": 120, "addBatch": 80, "walCommit": 5},
			Sources: []checkpoint.SourceProgress{{
				Source: "orders", StartOffset: json.RawMessage(`{"orders":{"0":0}}`), EndOffset: json.RawMessage(`{"orders":{"0":10}}`),
				NumInputRows: 100 + batch, Lag: &lag,
			}},
		},
	}
}

// runBatches adds offsets and commits for batches [from, to).
func runBatches(t testing.TB, c *checkpoint.Checkpoint, from, to int64) {
	t.Helper()
	for b := from; b < to; b++ {
		if err := c.AddOffsets(t.Context(), offsets(b)); err != nil {
			t.Fatalf("AddOffsets(%d) error = %v", b, err)
		}
		if err := c.AddCommit(t.Context(), commit(b)); err != nil {
			t.Fatalf("AddCommit(%d) error = %v", b, err)
		}
	}
}

func TestOffsetsFileFormat(t *testing.T) {
	d := newDir(t)
	c := claim(t, d)
	if err := c.AddOffsets(t.Context(), offsets(3)); err != nil {
		t.Fatal(err)
	}
	got, err := d.Get(t.Context(), "offsets/00000000000000000003")
	if err != nil {
		t.Fatal(err)
	}
	want := `v1
{"batchWatermarkMs":3000,"batchTimestampMs":1777000000003,"conf":{"lockstep.stateStore.partitions":"8"}}
{"source":"orders","offset":{"orders":{"0":30,"1":60}}}
{"source":"refunds","offset":{"logOffset":3}}
`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("offsets file mismatch (-want +got):\n%s", diff)
	}
}

func TestCommitFileFormat(t *testing.T) {
	d := newDir(t)
	c := claim(t, d)
	if err := c.AddCommit(t.Context(), checkpoint.Commit{BatchID: 0, NextBatchWatermarkMs: 42}); err != nil {
		t.Fatal(err)
	}
	got, err := d.Get(t.Context(), "commits/00000000000000000000")
	if err != nil {
		t.Fatal(err)
	}
	want := "v1\n" + `{"nextBatchWatermarkMs":42,"progress":{"timestamp":"0001-01-01T00:00:00Z","numInputRows":0,"numOutputRows":0}}` + "\n"
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("commit file mismatch (-want +got):\n%s", diff)
	}
}

func TestCommitKeepsJoinWatermarks(t *testing.T) {
	c := claim(t, newDir(t))
	if err := c.AddOffsets(t.Context(), offsets(0)); err != nil {
		t.Fatal(err)
	}
	want := checkpoint.Commit{BatchID: 0, NextBatchWatermarkMs: 42, WatermarksMs: map[string]int64{"j.left": 42, "j.right": 99}}
	if err := c.AddCommit(t.Context(), want); err != nil {
		t.Fatal(err)
	}
	h, err := c.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if h.Committed == nil {
		t.Fatal("Head() has no commit")
	}
	if diff := cmp.Diff(want.WatermarksMs, h.Committed.WatermarksMs); diff != "" {
		t.Errorf("watermarksMs after a round trip (-want +got):\n%s", diff)
	}
}

func TestLogRoundTrip(t *testing.T) {
	c := claim(t, newDir(t))
	runBatches(t, c, 0, 3)
	for b := range int64(3) {
		gotO, err := c.Offsets(t.Context(), b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(offsets(b), gotO); diff != "" {
			t.Errorf("Offsets(%d) mismatch (-want +got):\n%s", b, diff)
		}
		gotC, err := c.Commit(t.Context(), b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(commit(b), gotC); diff != "" {
			t.Errorf("Commit(%d) mismatch (-want +got):\n%s", b, diff)
		}
	}
	if _, err := c.Offsets(t.Context(), 3); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("Offsets(3) error = %v, want ErrNotFound", err)
	}
}

func TestAddOffsetsRefusesBadInput(t *testing.T) {
	c := claim(t, newDir(t))
	for name, o := range map[string]checkpoint.Offsets{
		"negative batch":   {BatchID: -1},
		"unnamed source":   {Sources: []checkpoint.SourceOffset{{Offset: json.RawMessage(`1`)}}},
		"duplicate source": {Sources: []checkpoint.SourceOffset{{Source: "a", Offset: json.RawMessage(`1`)}, {Source: "a", Offset: json.RawMessage(`2`)}}},
		"missing offset":   {Sources: []checkpoint.SourceOffset{{Source: "a"}}},
		"invalid JSON":     {Sources: []checkpoint.SourceOffset{{Source: "a", Offset: json.RawMessage(`{`)}}},
	} {
		if err := c.AddOffsets(t.Context(), o); err == nil {
			t.Errorf("AddOffsets(%s) error = nil, want an error", name)
		}
	}
	if keys, _ := checkpoint.ListKeys(t.Context(), c.Store(), "offsets/"); len(keys) != 0 {
		t.Errorf("refused entries were written: %q", keys)
	}
}

func TestDamagedOffsets(t *testing.T) {
	const key = "offsets/00000000000000000002"
	for name, content := range map[string]string{
		"empty":              "",
		"no version line":    `{"batchWatermarkMs":0,"batchTimestampMs":0}` + "\n",
		"garbage version":    "vX\n{}\n",
		"no batch line":      "v1\n",
		"truncated JSON":     "v1\n" + `{"batchWatermarkMs":0,"batchTim`,
		"missing timestamp":  "v1\n" + `{"batchWatermarkMs":0}` + "\n",
		"truncated source":   "v1\n" + `{"batchWatermarkMs":0,"batchTimestampMs":0}` + "\n" + `{"source":"orders","off`,
		"source w/o offset":  "v1\n" + `{"batchWatermarkMs":0,"batchTimestampMs":0}` + "\n" + `{"source":"orders"}` + "\n",
		"duplicate source":   "v1\n" + `{"batchWatermarkMs":0,"batchTimestampMs":0}` + "\n" + `{"source":"a","offset":1}` + "\n" + `{"source":"a","offset":2}` + "\n",
		"blank line":         "v1\n" + `{"batchWatermarkMs":0,"batchTimestampMs":0}` + "\n\n" + `{"source":"a","offset":1}` + "\n",
		"hand-edited binary": "v1\n\x00\x01\x02\n",
	} {
		t.Run(name, func(t *testing.T) {
			d := newDir(t)
			c := claim(t, d)
			runBatches(t, c, 0, 2)
			if err := c.AddOffsets(t.Context(), offsets(2)); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d.Location(), key), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := c.Offsets(t.Context(), 2)
			checkDamaged(t, "Offsets(2)", err, key)
			// A restart does not fall back to batch 1: it stops.
			_, err = c.Head(t.Context())
			checkDamaged(t, "Head", err, key)
			_, err = checkpoint.Describe(t.Context(), d)
			checkDamaged(t, "Describe", err, key)
			_, err = c.Purge(t.Context(), 1)
			checkDamaged(t, "Purge", err, key)
		})
	}
}

func checkDamaged(t *testing.T, call string, err error, key string) {
	t.Helper()
	if !errors.Is(err, checkpoint.ErrDamaged) {
		t.Errorf("%s error = %v, want ErrDamaged", call, err)
		return
	}
	if !strings.Contains(err.Error(), key) {
		t.Errorf("%s error = %q, want it to name %s", call, err, key)
	}
}

func TestDamagedCommitAndMetadata(t *testing.T) {
	d := newDir(t)
	c := claim(t, d)
	runBatches(t, c, 0, 1)
	write(t, d, "commits/00000000000000000000", "v1\n{\"progress\":{}}\n")
	if _, err := c.Head(t.Context()); !errors.Is(err, checkpoint.ErrDamaged) || !strings.Contains(err.Error(), "commits/00000000000000000000") {
		t.Errorf("Head with a commit without nextBatchWatermarkMs error = %v, want ErrDamaged naming it", err)
	}
	write(t, d, "metadata", `{"id":`)
	if _, err := checkpoint.Load(t.Context(), d); !errors.Is(err, checkpoint.ErrDamaged) || !strings.Contains(err.Error(), "metadata") {
		t.Errorf("Load with damaged metadata error = %v, want ErrDamaged naming it", err)
	}
	if _, err := checkpoint.Claim(t.Context(), d, owner); !errors.Is(err, checkpoint.ErrDamaged) {
		t.Errorf("Claim with damaged metadata error = %v, want ErrDamaged", err)
	}
}

func TestNewerFormatIsRefused(t *testing.T) {
	t.Run("offsets", func(t *testing.T) {
		d := newDir(t)
		c := claim(t, d)
		write(t, d, "offsets/00000000000000000000", "v2\n{\"something\":\"new\"}\n")
		_, err := c.Head(t.Context())
		if !errors.Is(err, checkpoint.ErrNewerFormat) || !strings.Contains(err.Error(), "offsets/00000000000000000000") {
			t.Errorf("Head error = %v, want ErrNewerFormat naming the object", err)
		}
	})
	t.Run("commit", func(t *testing.T) {
		d := newDir(t)
		c := claim(t, d)
		runBatches(t, c, 0, 1)
		write(t, d, "commits/00000000000000000000", "v7\n{}\n")
		if _, err := c.Commit(t.Context(), 0); !errors.Is(err, checkpoint.ErrNewerFormat) {
			t.Errorf("Commit error = %v, want ErrNewerFormat", err)
		}
	})
	t.Run("metadata", func(t *testing.T) {
		d := newDir(t)
		write(t, d, "metadata", `{"id":"x","owner":{"name":"q"},"formatVersion":2,"createdAt":"2026-01-01T00:00:00Z"}`)
		if _, err := checkpoint.Load(t.Context(), d); !errors.Is(err, checkpoint.ErrNewerFormat) || !strings.Contains(err.Error(), "metadata") {
			t.Errorf("Load error = %v, want ErrNewerFormat naming metadata", err)
		}
		if _, err := checkpoint.Claim(t.Context(), d, checkpoint.Owner{Name: "q"}); !errors.Is(err, checkpoint.ErrNewerFormat) {
			t.Errorf("Claim error = %v, want ErrNewerFormat", err)
		}
	})
}

func TestClaimCreatesMetadata(t *testing.T) {
	d := newDir(t)
	c := claim(t, d)
	m := c.Metadata()
	if len(m.ID) != 36 {
		t.Errorf("query id %q is not a UUID", m.ID)
	}
	want := checkpoint.Metadata{ID: m.ID, Owner: owner, FormatVersion: 1, CreatedAt: created}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("Metadata mismatch (-want +got):\n%s", diff)
	}
	again := claim(t, d)
	if diff := cmp.Diff(m, again.Metadata()); diff != "" {
		t.Errorf("second Claim by the same owner: metadata changed (-first +second):\n%s", diff)
	}
	other := claim(t, newDir(t))
	if other.Metadata().ID == m.ID {
		t.Errorf("two new checkpoints got the same query id %s", m.ID)
	}
}

// TestClaimWithQueryID: a new checkpoint takes the given id (Spark's, when the spark runtime
// adopts a Spark checkpoint); an existing one keeps its own.
func TestClaimWithQueryID(t *testing.T) {
	d := newDir(t)
	const id = "0b5c8d7e-27a1-4c1f-9d5e-5c1b2a3d4e5f"
	c, err := checkpoint.Claim(t.Context(), d, owner, checkpoint.WithQueryID(id))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Metadata().ID; got != id {
		t.Errorf("new checkpoint's query id = %q, want %q", got, id)
	}
	c, err = checkpoint.Claim(t.Context(), d, owner, checkpoint.WithQueryID("another"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Metadata().ID; got != id {
		t.Errorf("existing checkpoint's query id = %q, want %q kept", got, id)
	}
}

func TestConcurrentClaimsAgreeOnTheQueryID(t *testing.T) {
	storetest.ConcurrentClaims(t, newDir(t), owner)
}

func TestOwnerMismatch(t *testing.T) {
	d := newDir(t)
	first := claim(t, d)
	runBatches(t, first, 0, 2)
	intruder := checkpoint.Owner{Namespace: "payments", Name: "other-query", UID: "9"}

	_, err := checkpoint.Claim(t.Context(), d, intruder)
	if !errors.Is(err, checkpoint.ErrOwnerMismatch) {
		t.Fatalf("Claim by another owner error = %v, want ErrOwnerMismatch", err)
	}
	var mismatch *checkpoint.OwnerMismatchError
	if !errors.As(err, &mismatch) {
		t.Fatalf("Claim by another owner error %T, want *OwnerMismatchError", err)
	}
	want := &checkpoint.OwnerMismatchError{Location: d.Location(), ID: first.Metadata().ID, Recorded: owner, Claimed: intruder}
	if diff := cmp.Diff(want, mismatch); diff != "" {
		t.Errorf("OwnerMismatchError mismatch (-want +got):\n%s", diff)
	}

	// The same name with a new UID (the object was deleted with retention Retain and created
	// again) is the same query: it continues the checkpoint, on either runtime.
	renewed := owner
	renewed.UID = "new-uid"
	if again, err := checkpoint.Claim(t.Context(), d, renewed); err != nil || again.Metadata().ID != first.Metadata().ID {
		t.Errorf("Claim by a new UID = %v; want the same checkpoint (query id %s)", err, first.Metadata().ID)
	}
	// So is the claim without a UID (`lockstep run` of the same manifest).
	if _, err := checkpoint.Claim(t.Context(), d, checkpoint.Owner{Namespace: owner.Namespace, Name: owner.Name}); err != nil {
		t.Errorf("Claim without a UID error = %v, want nil", err)
	}
	// The same name in another namespace is another query.
	elsewhere := owner
	elsewhere.Namespace = "refunds"
	if _, err := checkpoint.Claim(t.Context(), d, elsewhere); !errors.Is(err, checkpoint.ErrOwnerMismatch) {
		t.Errorf("Claim from another namespace error = %v, want ErrOwnerMismatch", err)
	}

	adopted, err := checkpoint.Claim(t.Context(), d, intruder, checkpoint.Adopt())
	if err != nil {
		t.Fatalf("Claim with Adopt error = %v", err)
	}
	if got := adopted.Metadata(); got.ID != first.Metadata().ID || got.Owner != intruder {
		t.Errorf("after Adopt metadata = %+v, want the same query id and owner %v", got, intruder)
	}
	if h, err := adopted.Head(t.Context()); err != nil || h.Next() != 2 {
		t.Errorf("after Adopt Head().Next() = %v, %v; want 2: the new owner continues", h.Next(), err)
	}
	if _, err := checkpoint.Claim(t.Context(), d, owner); !errors.Is(err, checkpoint.ErrOwnerMismatch) {
		t.Errorf("Claim by the previous owner after Adopt error = %v, want ErrOwnerMismatch", err)
	}
}

func TestClaimRefusesALocationWithFilesButNoMetadata(t *testing.T) {
	d := newDir(t)
	write(t, d, "offsets/00000000000000000000", "v1\n{}\n")
	_, err := checkpoint.Claim(t.Context(), d, owner)
	if !errors.Is(err, checkpoint.ErrDamaged) {
		t.Errorf("Claim error = %v, want ErrDamaged", err)
	}
	if _, err := d.Get(t.Context(), "metadata"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("Claim wrote metadata over foreign files (Get error %v)", err)
	}
	if _, err := checkpoint.Load(t.Context(), d); !errors.Is(err, checkpoint.ErrDamaged) {
		t.Errorf("Load error = %v, want ErrDamaged", err)
	}
}

func TestLoadIsReadOnly(t *testing.T) {
	d := newDir(t)
	runBatches(t, claim(t, d), 0, 1)
	c, err := checkpoint.Load(t.Context(), d)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddOffsets(t.Context(), offsets(1)); !errors.Is(err, checkpoint.ErrReadOnly) {
		t.Errorf("AddOffsets on a loaded checkpoint error = %v, want ErrReadOnly", err)
	}
	if _, err := c.Purge(t.Context(), 1); !errors.Is(err, checkpoint.ErrReadOnly) {
		t.Errorf("Purge on a loaded checkpoint error = %v, want ErrReadOnly", err)
	}
}

func TestDirReadOnlyUseLeavesNoTrace(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ckpt")
	d, err := checkpoint.OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Load(t.Context(), d); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("Load of an empty location error = %v, want ErrNotFound", err)
	}
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reading a missing checkpoint created %s (stat error %v)", root, err)
	}
}

func TestFencing(t *testing.T) {
	d := newDir(t)
	a, b := claim(t, d), claim(t, d) // two processes that both believe they own the query
	runBatches(t, a, 0, 3)

	err := b.AddOffsets(t.Context(), offsets(2))
	if !errors.Is(err, checkpoint.ErrFenced) || !errors.Is(err, checkpoint.ErrExists) {
		t.Fatalf("second writer's AddOffsets(2) error = %v, want ErrFenced wrapping ErrExists", err)
	}
	if !strings.Contains(err.Error(), "another writer owns this checkpoint") {
		t.Errorf("fenced error %q does not say what happened", err)
	}
	if err := b.AddCommit(t.Context(), commit(1)); !errors.Is(err, checkpoint.ErrFenced) {
		t.Errorf("second writer's AddCommit(1) error = %v, want ErrFenced", err)
	}
	if err := a.RecordShape(t.Context(), 0, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := b.RecordShape(t.Context(), 0, []byte(`{"other":1}`)); !errors.Is(err, checkpoint.ErrFenced) {
		t.Errorf("second writer's RecordShape(0) error = %v, want ErrFenced", err)
	}
	if got, _ := a.Offsets(t.Context(), 2); got.BatchWatermarkMs != offsets(2).BatchWatermarkMs {
		t.Errorf("the loser changed offsets 2: %+v", got)
	}
}

func TestWritersRacingForABatch(t *testing.T) {
	d := newDir(t)
	writers := make([]*checkpoint.Checkpoint, 8)
	for i := range writers {
		writers[i] = claim(t, d)
	}
	for batch := range int64(20) {
		var wins, fenced atomic.Int32
		var wg sync.WaitGroup
		for _, w := range writers {
			wg.Go(func() {
				switch err := w.AddOffsets(t.Context(), offsets(batch)); {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, checkpoint.ErrFenced):
					fenced.Add(1)
				default:
					t.Errorf("batch %d: AddOffsets error = %v, want nil or ErrFenced", batch, err)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 || fenced.Load() != 7 {
			t.Fatalf("batch %d: %d writers won and %d were fenced, want 1 and 7", batch, wins.Load(), fenced.Load())
		}
		if err := writers[0].AddCommit(t.Context(), commit(batch)); err != nil {
			t.Fatal(err)
		}
	}
}

func write(t *testing.T, s checkpoint.Store, key, content string) {
	t.Helper()
	if err := s.Put(t.Context(), key, []byte(content)); err != nil {
		t.Fatal(err)
	}
}

// countingStore counts the calls made to a Store.
type countingStore struct {
	checkpoint.Store
	gets, lists, writes atomic.Int64
}

func (s *countingStore) Get(ctx context.Context, key string) ([]byte, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, key)
}

func (s *countingStore) List(ctx context.Context, prefix string) ([]checkpoint.ObjectInfo, error) {
	s.lists.Add(1)
	return s.Store.List(ctx, prefix)
}

func (s *countingStore) Create(ctx context.Context, key string, data []byte) error {
	s.writes.Add(1)
	return s.Store.Create(ctx, key, data)
}

func (s *countingStore) Put(ctx context.Context, key string, data []byte) error {
	s.writes.Add(1)
	return s.Store.Put(ctx, key, data)
}

// TestOffsetsRecordJoinSnapshots: the snapshot each stream–static join reads is recorded in
// the entry's header line and read back, so that a replay joins against the same snapshot.
func TestOffsetsRecordJoinSnapshots(t *testing.T) {
	d := newDir(t)
	c := claim(t, d)
	o := offsets(0)
	o.Joins = []checkpoint.JoinSnapshot{{Join: "customers", ReadAtMs: 1777000000000, Snapshot: json.RawMessage(`{"version":12}`)}}
	if err := c.AddOffsets(t.Context(), o); err != nil {
		t.Fatal(err)
	}
	got, err := d.Get(t.Context(), "offsets/00000000000000000000")
	if err != nil {
		t.Fatal(err)
	}
	if want := `"joins":[{"join":"customers","readAtMs":1777000000000,"snapshot":{"version":12}}]}` + "\n"; !strings.Contains(string(got), want) {
		t.Errorf("offsets file = %s, want its header to end with %s", got, want)
	}
	back, err := c.Offsets(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(o, back); diff != "" {
		t.Errorf("Offsets(0) mismatch (-want +got):\n%s", diff)
	}
	if j, ok := back.Join("customers"); !ok || string(j.Snapshot) != `{"version":12}` {
		t.Errorf("Join(customers) = %+v, %v", j, ok)
	}
	bad := offsets(1)
	bad.Joins = []checkpoint.JoinSnapshot{{Join: "a", Snapshot: json.RawMessage(`1`)}, {Join: "a", Snapshot: json.RawMessage(`2`)}}
	if err := c.AddOffsets(t.Context(), bad); err == nil {
		t.Error("AddOffsets with a join recorded twice: error = nil")
	}
}
