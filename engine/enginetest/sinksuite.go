package enginetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
)

// SinkHarness is one fresh output of an exactly-once sink under test.
type SinkHarness struct {
	// New returns a new sink instance writing to the output, as a new
	// engine process would build it.
	New func(t *testing.T) engine.Sink
	// Read returns the rows committed to the output, as its readers see
	// them, in any order.
	Read func(t *testing.T) []engine.Row
	// Upsert says the sink runs in update mode with SinkKeys as its keys: a
	// batch's row replaces the output's row with the same id. The suite
	// then expects upserts where it expects appends, and checks them.
	Upsert bool
}

// SinkKeys are the key columns of the suite's batches in update mode.
var SinkKeys = []string{"id"}

// SinkColumns are the columns of the suite's batches.
var SinkColumns = v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "n", Type: v1.TypeLong}}

// RunSinkSuite checks that an exactly-once sink makes a replayed batch
// harmless: writing batch N again, from the same or a new instance, with
// the same or other rows, or from several instances at once, leaves the
// output as if it had been written once; and that a new query id (a fresh
// checkpoint) writing into the same output is neither skipped nor skips.
// newOutput returns a fresh, empty output each time it is called.
func RunSinkSuite(t *testing.T, newOutput func(t *testing.T) SinkHarness) {
	// Shorthands, so that each case reads as the batches it writes.
	batch, row, check, write := suiteBatch, suiteRow, checkOutput, writeBatch

	t.Run("Batches", func(t *testing.T) {
		h := newOutput(t)
		s := h.New(t)
		write(t, s, batch("q1", 0, row("a", 1), row("b", 2)))
		write(t, s, batch("q1", 1, row("c", 3)))
		check(t, h, []engine.Row{row("a", 1), row("b", 2), row("c", 3)})
	})
	t.Run("ReplaySameInstance", func(t *testing.T) {
		h := newOutput(t)
		s := h.New(t)
		write(t, s, batch("q1", 0, row("a", 1)))
		write(t, s, batch("q1", 0, row("a", 1)))
		check(t, h, []engine.Row{row("a", 1)})
	})
	t.Run("ReplayNewInstanceOtherRows", func(t *testing.T) {
		// A restarted engine replays the batch with new logic: the first
		// commit stands.
		h := newOutput(t)
		write(t, h.New(t), batch("q1", 0, row("a", 1)))
		write(t, h.New(t), batch("q1", 0, row("a", 1), row("z", 9)))
		write(t, h.New(t), batch("q1", 1, row("b", 2)))
		check(t, h, []engine.Row{row("a", 1), row("b", 2)})
	})
	t.Run("EmptyBatch", func(t *testing.T) {
		h := newOutput(t)
		s := h.New(t)
		write(t, s, batch("q1", 0))
		write(t, h.New(t), batch("q1", 0, row("late", 1)))
		check(t, h, nil)
	})
	t.Run("FreshCheckpointSameOutput", func(t *testing.T) {
		// A new query id counts batches from 0 again; neither output hides
		// the other (Spark's file-sink trap, Delta's fixed txnAppId trap).
		h := newOutput(t)
		write(t, h.New(t), batch("q1", 0, row("a", 1)))
		write(t, h.New(t), batch("q2", 0, row("a", 1)))
		write(t, h.New(t), batch("q2", 1, row("b", 2)))
		if h.Upsert {
			check(t, h, []engine.Row{row("a", 1), row("b", 2)}) // q2's a replaced q1's
			return
		}
		check(t, h, []engine.Row{row("a", 1), row("a", 1), row("b", 2)})
	})
	t.Run("UpsertReplacesByKey", func(t *testing.T) {
		h := newOutput(t)
		if !h.Upsert {
			t.Skip("the sink appends")
		}
		write(t, h.New(t), batch("q1", 0, row("a", 1), row("b", 2)))
		write(t, h.New(t), batch("q1", 1, row("a", 5), row("c", 3)))
		// A replay of batch 1 with other values changes nothing.
		write(t, h.New(t), batch("q1", 1, row("a", 9), row("b", 9)))
		write(t, h.New(t), batch("q1", 2, row("c", 4)))
		check(t, h, []engine.Row{row("a", 5), row("b", 2), row("c", 4)})
	})
	t.Run("ConcurrentReplays", func(t *testing.T) { concurrentReplays(t, newOutput(t)) })
}

// concurrentReplays writes batch 0 from several instances at once: the output holds the
// rows of one of them.
func concurrentReplays(t *testing.T, h SinkHarness) {
	const writers = 4
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		s := h.New(t)
		wg.Go(func() {
			errs <- s.Write(context.Background(), suiteBatch("q1", 0, suiteRow("a", 1), suiteRow(fmt.Sprint("w", i), int64(i))))
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Write: %v", err) // whole: Unwrap of a joined error is nil
		}
	}
	got := h.Read(t)
	if len(got) != 2 {
		t.Fatalf("output holds %d rows, want the 2 of one writer: %v", len(got), got)
	}
}

// suiteBatch is batch id of query, holding rows of SinkColumns.
func suiteBatch(query string, id int64, rows ...engine.Row) *engine.Batch {
	at := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	return &engine.Batch{QueryID: query, ID: id, Time: at.Add(time.Duration(id) * time.Second), Columns: SinkColumns, Rows: rows}
}

// suiteRow is a row of SinkColumns.
func suiteRow(id string, n int64) engine.Row { return engine.Row{id, n} }

// checkOutput checks that h's output holds want, in any order.
func checkOutput(t *testing.T, h SinkHarness, want []engine.Row) {
	t.Helper()
	got := h.Read(t)
	SortRows(got)
	SortRows(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

// writeBatch writes b with s, failing the test on an error.
func writeBatch(t *testing.T, s engine.Sink, b *engine.Batch) {
	t.Helper()
	if err := s.Write(context.Background(), b); err != nil {
		t.Fatalf("Write(batch %d of %s): %v", b.ID, b.QueryID, err)
	}
}
