package delta_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine/delta"
)

// Every tenth commit is followed by a Parquet checkpoint and
// _last_checkpoint; a new reader starts there and reads only the commits
// after it, and gets the same snapshot as the writer that replayed
// everything.
func TestCheckpointEveryTenCommits(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func() checkpoint.Store) {
		ctx := t.Context()
		writer := delta.Open(open())
		for b := range 25 {
			w := delta.Write{AppID: "q", Version: int64(b), Columns: orderColumns, Rows: orders(b, 3)}
			if b%4 == 0 {
				w.AppID = fmt.Sprintf("other-%d", b) // several applications in the checkpoint
			}
			res, err := writer.Write(ctx, w)
			if err != nil {
				t.Fatalf("Write(%d) error = %v", b, err)
			}
			if res.CheckpointErr != nil {
				t.Fatalf("Write(%d) checkpoint error = %v", b, res.CheckpointErr)
			}
		}
		store := open()
		keys, err := checkpoint.ListKeys(ctx, store, "_delta_log/")
		if err != nil {
			t.Fatal(err)
		}
		var checkpoints []string
		for _, k := range keys {
			if len(k) > 40 && k[len(k)-19:] == ".checkpoint.parquet" {
				checkpoints = append(checkpoints, k)
			}
		}
		wantCheckpoints := []string{"_delta_log/00000000000000000010.checkpoint.parquet", "_delta_log/00000000000000000020.checkpoint.parquet"}
		if diff := cmp.Diff(wantCheckpoints, checkpoints); diff != "" {
			t.Errorf("checkpoints diff (-want +got):\n%s", diff)
		}
		b, err := store.Get(ctx, "_delta_log/_last_checkpoint")
		if err != nil {
			t.Fatal(err)
		}
		var last struct{ Version, Size int64 }
		if err := json.Unmarshal(b, &last); err != nil || last.Version != 20 || last.Size == 0 {
			t.Errorf("_last_checkpoint = %s (%v), want version 20 and a size", b, err)
		}

		counting := &countingStore{Store: open()}
		reader := delta.Open(counting)
		v, ok, err := reader.TxnVersion(ctx, "q")
		if err != nil || !ok || v != 23 {
			t.Errorf("TxnVersion(q) = %d, %t, %v; want 23", v, ok, err)
		}
		for _, k := range counting.commitsRead() {
			if k < "_delta_log/00000000000000000021.json" {
				t.Errorf("a reader starting at checkpoint 20 read %s", k)
			}
		}
		t.Logf("commits read: %v", counting.commitsRead())

		fromCheckpoint, err := reader.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		replayed, err := writer.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		compareSnapshots(t, replayed, fromCheckpoint)
	})
}

func compareSnapshots(t *testing.T, want, got *delta.Snapshot) {
	t.Helper()
	if got.Version != want.Version {
		t.Errorf("Version = %d, want %d", got.Version, want.Version)
	}
	if diff := cmp.Diff(want.Protocol, got.Protocol); diff != "" {
		t.Errorf("Protocol diff (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want.Metadata, got.Metadata); diff != "" {
		t.Errorf("Metadata diff (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want.Txns(), got.Txns()); diff != "" {
		t.Errorf("Txns diff (-want +got):\n%s", diff)
	}
	// A checkpoint stores adds with dataChange false.
	strip := func(fs []delta.Add) []delta.Add {
		for i := range fs {
			fs[i].DataChange = false
		}
		return fs
	}
	if diff := cmp.Diff(strip(want.Files()), strip(got.Files())); diff != "" {
		t.Errorf("Files diff (-want +got):\n%s", diff)
	}
}

// A complete-mode table keeps tombstones in its checkpoints, and its
// partitioned files' partition values survive the round trip.
func TestCheckpointRoundTripsRemovesAndPartitions(t *testing.T) {
	ctx := context.Background()
	open := newLocation(t, "local")
	w := delta.Open(open(), delta.WithCheckpointInterval(2))
	for b := range 5 {
		rows := orders(b, 8)
		if _, err := w.Write(ctx, delta.Write{AppID: "q", Version: int64(b), Columns: orderColumns, Rows: rows,
			PartitionColumns: []string{"country"}, Mode: delta.Complete}); err != nil {
			t.Fatal(err)
		}
	}
	replayed, err := w.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := delta.Open(open()).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	compareSnapshots(t, replayed, fresh)
	_, _, rows := readAll(t, open())
	if diff := cmp.Diff(sortRows(orders(4, 8)), rows); diff != "" {
		t.Errorf("rows diff (-want +got):\n%s", diff)
	}
}

// A cold lookup of the newest txn (a restarted engine's first question)
// sends the same requests to a table of 1,000 commits as to one of 40, and
// lists nothing: _last_checkpoint, the checkpoint, the commits after it and
// one miss.
func TestNewestTxnCostDoesNotGrowWithTheLog(t *testing.T) {
	ctx := context.Background()
	requests := map[int][2]int{}
	for _, commits := range []int{40, 1000} {
		open := newLocation(t, "local")
		w := delta.Open(open())
		for v := range commits {
			var rows []delta.Row
			if v < 20 {
				rows = orders(v, 2) // 20 files, then empty batches (txn only)
			}
			if _, err := w.Write(ctx, delta.Write{AppID: "q", Version: int64(v), Columns: orderColumns, Rows: rows}); err != nil {
				t.Fatal(err)
			}
		}
		// Five commits past the newest checkpoint.
		for v := commits; v < commits+5; v++ {
			if _, err := w.Write(ctx, delta.Write{AppID: "q", Version: int64(v), Columns: orderColumns}); err != nil {
				t.Fatal(err)
			}
		}
		cs := &countingStore{Store: open()}
		v, ok, err := delta.Open(cs).TxnVersion(ctx, "q")
		if err != nil || !ok || v != int64(commits+4) {
			t.Fatalf("TxnVersion = %d, %t, %v; want %d", v, ok, err, commits+4)
		}
		gets, lists := cs.requests()
		requests[commits] = [2]int{gets, lists}
		if lists != 0 {
			t.Errorf("%d commits: the lookup listed the log %d times, want 0", commits, lists)
		}
	}
	if requests[40] != requests[1000] {
		t.Errorf("requests (gets, lists) = %v at 40 commits, %v at 1000; want the same", requests[40], requests[1000])
	}
	t.Logf("requests (gets, lists): %v", requests)
}
