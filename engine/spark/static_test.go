package spark_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine/spark/sparktest"
)

// TestStaticSnapshotAcrossRestart: a stream–static join on a files folder and one on a Delta
// table run on both runtimes over the orders' first file. While the queries are stopped, the
// static sides change (a new file in the folder, a new commit to the table, both with new
// names for customers that the second file's orders have) and the orders' second file arrives.
// After the restart, both runtimes join the second file's orders with the first run's
// snapshot (docs/spark.md, "A static join's snapshot"): no row has a new name, and the outputs
// are equal.
func TestStaticSnapshotAcrossRestart(t *testing.T) {
	t.Parallel()
	runner := sparktest.Runner(t)
	ctx := context.Background()
	dir := t.TempDir()
	in, folder, tableIn, table := filepath.Join(dir, "in"), filepath.Join(dir, "customers"), filepath.Join(dir, "table-in"), filepath.Join(dir, "table")
	base := time.Now().Add(-time.Hour)
	writeFileAt(t, filepath.Join(in, "part-0.json"), diffInput[0], base)
	writeFileAt(t, filepath.Join(folder, "part-0.json"), diffCustomers, base)
	writeFileAt(t, filepath.Join(tableIn, "part-0.json"), diffCustomers, base)
	makeTable := func() {
		runBuiltin(t, ctx, qt.Make("make-table", "diff").FilesSource("customers", tableIn, v1.FormatJSON, diffCustomerColumns...).
			DeltaSink(table).AvailableNow().Checkpoint(filepath.Join(dir, "ck-table")).Obj())
	}
	makeTable()

	query := func(kind, runtime string) *v1.StreamingQuery {
		static := qt.StaticFiles(folder, v1.FormatJSON, diffCustomerColumns...)
		if kind == "delta" {
			static = qt.StaticDelta(table, diffCustomerColumns...)
		}
		name := kind + "-" + runtime
		return qt.Make("static-"+name, "diff").FilesSource("orders", in, v1.FormatJSON, diffColumns...).
			EditSource("orders", func(s *v1.Source) { s.Files.MaxFilesPerTrigger = ptr[int32](1) }).
			Join(v1.Join{Type: v1.JoinLeftOuter, Keys: qt.Keys("id", "cid"), Static: static, RightPrefix: "c_"}).
			Select(qt.As("id", "id"), qt.As("qty", "qty"), qt.As("c_name", "c_name"), qt.As("c_tier", "c_tier")).
			FilesSink(filepath.Join(dir, "out-"+name), v1.FormatJSON).AvailableNow().Checkpoint(filepath.Join(dir, "ck-"+name)).Obj()
	}
	kinds := []string{"files", "delta"}
	runAll := func() {
		for _, kind := range kinds {
			runBuiltin(t, ctx, query(kind, "lockstep"))
			runSpark(t, ctx, runner, query(kind, "spark"))
		}
	}
	runAll()

	// The static sides change while the queries are stopped; new orders arrive.
	const renamed = `{"cid":"a3","name":"Al New","tier":7,"since":null}
{"cid":"b1","name":"Bob New","tier":8,"since":null}
`
	writeFileAt(t, filepath.Join(folder, "part-1.json"), renamed, base.Add(time.Minute))
	writeFileAt(t, filepath.Join(tableIn, "part-1.json"), renamed, base.Add(time.Minute))
	makeTable()
	writeFileAt(t, filepath.Join(in, "part-1.json"), diffInput[1], base.Add(time.Minute))
	runAll()

	for _, kind := range kinds {
		want := readOutput(t, ctx, query(kind, "lockstep").Spec.Sink.Files.Path, false)
		got := readOutput(t, ctx, query(kind, "spark").Spec.Sink.Files.Path, false)
		if len(want) == 0 {
			t.Fatalf("%s: the built-in engine wrote no rows", kind)
		}
		for _, row := range want {
			if strings.Contains(row, " New") {
				t.Errorf("%s: the built-in engine joined a row of the static side's new snapshot after the restart: %s", kind, row)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: after a restart, spark joins another snapshot than the built-in engine (-lockstep +spark):\n%s", kind, diff)
		}
	}
}

// writeFileAt writes data to path, creating its folder, modified at mt.
func writeFileAt(t *testing.T, path, data string, mt time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mt, mt); err != nil {
		t.Fatal(err)
	}
}
