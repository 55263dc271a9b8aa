package delta_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine/delta"
	"github.com/lockstep-dev/lockstep/engine/delta/deltatest"
)

// DuckDB, replaying _delta_log on its own, sees the rows and the txn
// versions this package wrote: across a checkpoint, partitions (with a null
// partition), a column added later, and a complete-mode overwrite.
func TestDuckDBReadsWhatWeWrite(t *testing.T) {
	deltatest.DuckDBModules(t)
	ctx := context.Background()
	withNote := append(orderColumns[:len(orderColumns):len(orderColumns)], v1.Column{Name: "note", Type: v1.TypeString})
	for _, tc := range []struct {
		name   string
		writes func(tbl *delta.Table) error
	}{
		{"appends across a checkpoint", func(tbl *delta.Table) error {
			for b := range 13 {
				if _, err := tbl.Write(ctx, delta.Write{AppID: "query-1", Version: int64(b), Columns: orderColumns, Rows: orders(b, 40)}); err != nil {
					return err
				}
			}
			_, err := tbl.Write(ctx, delta.Write{AppID: "query-2", Version: 0, Columns: orderColumns, Rows: orders(99, 5)})
			return err
		}},
		{"partitioned, with a new column", func(tbl *delta.Table) error {
			for b := range 12 {
				cols, rows := orderColumns, orders(b, 25)
				if b >= 6 {
					cols = withNote
					for i := range rows {
						rows[i] = append(rows[i], fmt.Sprintf("note %d", i))
					}
				}
				if b == 3 {
					rows[0][1] = nil // a null partition
				}
				if _, err := tbl.Write(ctx, delta.Write{AppID: "q", Version: int64(b), Columns: cols, Rows: rows, PartitionColumns: []string{"country"}}); err != nil {
					return err
				}
			}
			return nil
		}},
		{"complete mode", func(tbl *delta.Table) error {
			for b := range 11 {
				if _, err := tbl.Write(ctx, delta.Write{AppID: "agg", Version: int64(b), Columns: orderColumns, Rows: orders(b, 4+b), Mode: delta.Complete}); err != nil {
					return err
				}
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			store := localStore(t, dir)
			if err := tc.writes(delta.Open(store)); err != nil {
				t.Fatalf("write: %v", err)
			}
			snap, _, want := readAll(t, store)
			got := deltatest.ReadWithDuckDB(t, dir)
			if got.Version != snap.Version {
				t.Errorf("DuckDB replayed version %d, want %d", got.Version, snap.Version)
			}
			wantTxns := txnVersions(snap)
			if diff := cmp.Diff(wantTxns, got.Txns); diff != "" {
				t.Errorf("txns diff (-ours +DuckDB):\n%s", diff)
			}
			if diff := cmp.Diff(want, sortRows(got.TypedRows(t))); diff != "" {
				t.Errorf("rows diff (-ours +DuckDB):\n%s", diff)
			}
			t.Logf("DuckDB read %d rows at version %d, txns %v", len(got.Rows), got.Version, got.Txns)
		})
	}
}
