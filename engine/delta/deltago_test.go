package delta_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/engine/delta"
	"github.com/lockstep-dev/lockstep/engine/delta/deltatest"
)

// rivian/delta-go, another implementation of the protocol, replays our log:
// the same version, files, partition values, txn versions and schema. With
// the commits before the newest checkpoint deleted (as a log cleanup does),
// it must read our Parquet checkpoint to get there.
func TestDeltaGoReplaysOurLog(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store := localStore(t, dir)
	tbl := delta.Open(store)
	for b := range 23 {
		w := delta.Write{AppID: "query-a", Version: int64(b), Columns: orderColumns, Rows: orders(b, 10), PartitionColumns: []string{"country"}}
		if b%5 == 4 {
			w.AppID = fmt.Sprintf("query-%d", b)
			w.Version = 0
		}
		if _, err := tbl.Write(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	ours, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}

	truncated := t.TempDir()
	if err := os.CopyFS(truncated, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	for v := range 20 {
		if err := os.Remove(filepath.Join(truncated, "_delta_log", fmt.Sprintf("%020d.json", v))); err != nil {
			t.Fatal(err)
		}
	}

	for name, path := range map[string]string{"whole log": dir, "log from checkpoint 20 on": truncated} {
		t.Run(name, func(t *testing.T) {
			st := deltatest.DeltaGo(t, path, nil).State
			if st.Version != ours.Version {
				t.Errorf("delta-go version = %d, want %d", st.Version, ours.Version)
			}
			wantTxns := txnVersions(ours)
			if diff := cmp.Diff(wantTxns, st.AppTransactionVersion); diff != "" {
				t.Errorf("txn versions diff (-ours +delta-go):\n%s", diff)
			}
			wantFiles := map[string]string{}
			for _, f := range ours.Files() {
				wantFiles[f.Path] = *f.PartitionValues["country"]
			}
			gotFiles := map[string]string{}
			for p, f := range st.Files {
				gotFiles[p] = f.PartitionValues["country"]
			}
			if diff := cmp.Diff(wantFiles, gotFiles); diff != "" {
				t.Errorf("active files diff (-ours +delta-go):\n%s", diff)
			}
			if st.CurrentMetadata == nil {
				t.Fatal("delta-go read no metadata")
			}
			if diff := cmp.Diff([]string{"country"}, st.CurrentMetadata.PartitionColumns); diff != "" {
				t.Errorf("partition columns diff:\n%s", diff)
			}
			var fields []string
			for _, f := range st.CurrentMetadata.Schema.Fields {
				fields = append(fields, f.Name+":"+fmt.Sprint(f.Type))
			}
			var want []string
			for _, c := range orderColumns {
				want = append(want, c.Name+":"+string(c.Type))
			}
			if diff := cmp.Diff(want, fields); diff != "" {
				t.Errorf("schema diff (-ours +delta-go):\n%s", diff)
			}
			t.Logf("delta-go: version %d, %d files, apps %v", st.Version, len(st.Files), slices.Sorted(maps.Keys(st.AppTransactionVersion)))
		})
	}

	// Our reader also starts from the checkpoint when the older commits are gone.
	trunc := localStore(t, truncated)
	s, err := delta.Open(trunc).Snapshot(ctx)
	if err != nil {
		t.Fatalf("Snapshot() of the truncated log error = %v", err)
	}
	compareSnapshots(t, ours, s)
}
