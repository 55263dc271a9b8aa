package spark_test

import (
	"context"
	"path/filepath"
	"testing"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine/spark/sparktest"
)

// TestDifferentialDelta: a Delta source (a table the built-in engine's Delta sink wrote, two
// commits) read by both runtimes — on Spark a named source with source evolution on — filtered
// and projected into files: equal multisets. Then the same table as the static side of a
// stream–static join (Spark pins the version it first read), and a table rewritten at every
// commit (complete mode) read with ignoreChanges: every added file's rows, on both.
func TestDifferentialDelta(t *testing.T) {
	t.Parallel()
	runner := sparktest.Runner(t)
	ctx := context.Background()
	dir := t.TempDir()
	in, table := writeDeltaInput(t, ctx, dir)

	query := func(name string) *v1.StreamingQuery {
		return qt.Make("delta-"+name, "diff").DeltaSource("orders", table, diffColumns...).
			EditSource("orders", func(s *v1.Source) { s.Delta.MaxFilesPerTrigger = ptr[int32](1) }).
			Filter("qty > 1").SelectColumns("id", "qty", "amount", "ts").
			FilesSink(filepath.Join(dir, "out-"+name), v1.FormatJSON).AvailableNow().Checkpoint(filepath.Join(dir, "ck-"+name)).Obj()
	}
	compareRuntimes(t, ctx, runner, "a delta source", query)

	join := func(name string) *v1.StreamingQuery {
		static := qt.StaticDelta(table, qt.Col("id", v1.TypeString), qt.Col("amount", v1.TypeDouble))
		return qt.Make("delta-static-"+name, "diff").FilesSource("orders", in, v1.FormatJSON, diffColumns...).
			EditSource("orders", func(s *v1.Source) { s.Files.MaxFilesPerTrigger = ptr[int32](1) }).
			Filter("qty != 2").
			Join(v1.Join{Type: v1.JoinLeftOuter, Keys: qt.Keys("id", "id"), Static: static, RightPrefix: "t_"}).
			Select(qt.As("id", "id"), qt.As("t_amount", "t_amount")).
			FilesSink(filepath.Join(dir, "join-"+name), v1.FormatJSON).AvailableNow().Checkpoint(filepath.Join(dir, "ck-join-"+name)).Obj()
	}
	compareRuntimes(t, ctx, runner, "a delta static side", join)

	rewritten := filepath.Join(dir, "rewritten")
	runBuiltin(t, ctx, qt.Make("make-rewritten", "diff").FilesSource("orders", in, v1.FormatJSON, diffColumns...).
		EditSource("orders", func(s *v1.Source) { s.Files.MaxFilesPerTrigger = ptr[int32](1) }).
		Aggregate("", []v1.GroupKey{{Column: "id"}}, v1.Aggregation{Name: "n", Function: v1.AggCount}).OutputMode(v1.OutputComplete).
		DeltaSink(rewritten).AvailableNow().Checkpoint(filepath.Join(dir, "ck-rewritten")).Obj())
	changes := func(name string) *v1.StreamingQuery {
		return qt.Make("delta-changes-"+name, "diff").DeltaSource("counts", rewritten, qt.Col("id", v1.TypeString), qt.Col("n", v1.TypeLong)).
			EditSource("counts", func(s *v1.Source) {
				s.Delta.StartingVersion = ptr[int64](0)
				s.Delta.IgnoreChanges = true
			}).
			FilesSink(filepath.Join(dir, "changes-"+name), v1.FormatJSON).AvailableNow().Checkpoint(filepath.Join(dir, "ck-changes-"+name)).Obj()
	}
	compareRuntimes(t, ctx, runner, "a rewritten table read with ignoreChanges", changes)
}

// writeDeltaInput writes the differential input (writeInput) into dir/in and, with the built-in
// engine, into the Delta table dir/table, one commit a file; it returns both paths.
func writeDeltaInput(t *testing.T, ctx context.Context, dir string) (in, table string) {
	t.Helper()
	in, table = filepath.Join(dir, "in"), filepath.Join(dir, "table")
	writeInput(t, in)
	runBuiltin(t, ctx, qt.Make("make-table", "spark").FilesSource("orders", in, v1.FormatJSON, diffColumns...).
		EditSource("orders", func(s *v1.Source) { s.Files.MaxFilesPerTrigger = ptr[int32](1) }).
		DeltaSink(table).AvailableNow().Checkpoint(filepath.Join(dir, "ck-table")).Obj())
	return in, table
}
