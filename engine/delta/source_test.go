package delta_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/delta"
)

var sourceColumns = v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "n", Type: v1.TypeLong}}

// sourceRig is a table, a delta source on it, and the engine's view of the
// source's progress.
type sourceRig struct {
	t     *testing.T
	loc   tableLocation
	tbl   *delta.Table
	src   engine.Source
	end   engine.Offset
	batch int64
}

func newSourceRig(t *testing.T, kind string) *sourceRig {
	l := newTableLocation(t, kind)
	return &sourceRig{t: t, loc: l, tbl: l.table(t)}
}

// start builds the source (as a new engine run would), keeping the
// checkpoint folder of the source across calls.
func (r *sourceRig) start(private checkpoint.Store, edit func(*v1.DeltaSource)) {
	r.t.Helper()
	spec := &v1.Source{Name: "in", Delta: &v1.DeltaSource{Path: r.loc.path}, Schema: &v1.Schema{Columns: sourceColumns}}
	if edit != nil {
		edit(spec.Delta)
	}
	src, err := delta.NewSource(context.Background(), spec, engine.SourceEnv{Name: "in", QueryID: "q", Store: private, Open: r.loc.open})
	if err != nil {
		r.t.Fatalf("NewSource() error = %v", err)
	}
	r.src = src
}

// append commits one file of the given ids.
func (r *sourceRig) append(ids ...string) {
	r.t.Helper()
	rows := make([]delta.Row, len(ids))
	for i, id := range ids {
		rows[i] = delta.Row{id, int64(i)}
	}
	if _, err := r.tbl.Write(context.Background(), delta.Write{Columns: sourceColumns, Rows: rows}); err != nil {
		r.t.Fatal(err)
	}
}

// next plans and reads one batch, returning its ids; nil when Plan finds no
// data.
func (r *sourceRig) next(limit bool) ([]string, error) {
	r.t.Helper()
	ctx := context.Background()
	p, err := r.src.Plan(ctx, engine.PlanRequest{Batch: r.batch, Start: r.end, Time: time.Now(), Limit: limit})
	if err != nil {
		return nil, err
	}
	if !p.HasData {
		return nil, nil
	}
	res, err := r.src.Read(ctx, engine.ReadRequest{Batch: r.batch, Start: r.end, End: p.End})
	if err != nil {
		return nil, err
	}
	r.end = p.End
	r.batch++
	ids := []string{}
	for _, row := range res.Rows {
		ids = append(ids, row[0].(string))
	}
	return ids, nil
}

func (r *sourceRig) mustNext(limit bool) []string {
	r.t.Helper()
	ids, err := r.next(limit)
	if err != nil {
		r.t.Fatalf("next batch: %v", err)
	}
	return ids
}

func privateStore(t *testing.T) checkpoint.Store {
	return localStore(t, t.TempDir())
}

// A new source without startingVersion reads the table's content, then the
// commits after it; maxFilesPerTrigger caps each batch, the once trigger
// (no limit) does not.
func TestSourceSnapshotThenCommits(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			r := newSourceRig(t, kind)
			r.append("a")
			r.append("b")
			r.append("c")
			private := privateStore(t)
			r.start(private, func(d *v1.DeltaSource) { d.MaxFilesPerTrigger = new(int32(2)) })
			var got [][]string
			got = append(got, r.mustNext(true))
			r.append("d")
			r.start(private, func(d *v1.DeltaSource) { d.MaxFilesPerTrigger = new(int32(2)) }) // a restart keeps the position
			got = append(got, r.mustNext(true))                                                // the snapshot's last file, then the commit after it
			r.append("e")
			r.append("f")
			r.append("g")
			got = append(got, r.mustNext(false))
			if ids := r.mustNext(true); ids != nil {
				t.Errorf("batch with nothing new = %v, want no data", ids)
			}
			want := [][]string{{"a", "b"}, {"c", "d"}, {"e", "f", "g"}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("batches (-want +got):\n%s", diff)
			}
			var off map[string]any
			_ = json.Unmarshal(r.end, &off)
			t.Logf("final offset %v", off)
		})
	}
}

// A commit with several files (a partitioned write) is split across
// batches by maxFilesPerTrigger at the file index.
func TestSourceSplitsACommit(t *testing.T) {
	r := newSourceRig(t, "local")
	r.start(privateStore(t), func(d *v1.DeltaSource) { d.MaxFilesPerTrigger = new(int32(2)); d.StartingVersion = new(int64(0)) })
	rows := []delta.Row{{"p1", int64(1)}, {"p2", int64(2)}, {"p3", int64(3)}}
	if _, err := r.tbl.Write(context.Background(), delta.Write{Columns: sourceColumns, Rows: rows, PartitionColumns: []string{"n"}}); err != nil {
		t.Fatal(err)
	}
	got := [][]string{r.mustNext(true), r.mustNext(true)}
	want := [][]string{{"p1", "p2"}, {"p3"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("batches (-want +got):\n%s", diff)
	}
}

func TestSourceStartingVersion(t *testing.T) {
	r := newSourceRig(t, "local")
	for _, id := range []string{"v0", "v1", "v2", "v3"} {
		r.append(id)
	}
	r.start(privateStore(t), func(d *v1.DeltaSource) { d.StartingVersion = new(int64(2)) })
	if diff := cmp.Diff([]string{"v2", "v3"}, r.mustNext(true)); diff != "" {
		t.Errorf("batch (-want +got):\n%s", diff)
	}
}

// A commit that removes data stops the stream unless ignoreChanges.
func TestSourceChanges(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		r := newSourceRig(t, "local")
		r.start(privateStore(t), func(d *v1.DeltaSource) { d.StartingVersion = new(int64(0)); d.IgnoreChanges = ignore })
		r.append("a")
		ctx := context.Background()
		if _, err := r.tbl.Write(ctx, delta.Write{Columns: sourceColumns, Rows: []delta.Row{{"b", int64(0)}}, Mode: delta.Complete}); err != nil {
			t.Fatal(err)
		}
		ids, err := r.next(true)
		if ignore {
			if err != nil || !cmp.Equal(ids, []string{"a", "b"}) {
				t.Errorf("ignoreChanges: batch = %v, %v; want [a b]", ids, err)
			}
			continue
		}
		if !errors.Is(err, delta.ErrDataChanged) {
			t.Errorf("batch over a complete write = %v, %v; want ErrDataChanged", ids, err)
		}
		t.Logf("error: %v", err)
	}
}

// A source that fell behind log retention stops with a data-loss error
// (or, with failOnDataLoss false, continues at the oldest commit left).
func TestSourceDataLoss(t *testing.T) {
	for _, kind := range storeKinds {
		for _, fail := range []bool{true, false} {
			name := kind + "/failOnDataLoss=" + map[bool]string{true: "true", false: "false"}[fail]
			t.Run(name, func(t *testing.T) {
				r := newSourceRig(t, kind)
				private := privateStore(t)
				edit := func(d *v1.DeltaSource) {
					d.StartingVersion = new(int64(0))
					d.MaxFilesPerTrigger = new(int32(3))
					d.FailOnDataLoss = new(fail)
				}
				r.start(private, edit)
				ids := []string{}
				for i := range 25 {
					id := string(rune('A' + i))
					ids = append(ids, id)
					r.append(id)
				}
				if diff := cmp.Diff([]string{"A", "B", "C"}, r.mustNext(true)); diff != "" {
					t.Fatalf("first batch (-want +got):\n%s", diff)
				}
				n, err := r.tbl.CleanupLog(context.Background(), 20)
				if err != nil || n != 21 { // commits 0-19 and checkpoint 10
					t.Fatalf("CleanupLog(20) = %d, %v; want 21 files deleted", n, err)
				}
				r.start(private, edit)
				got, err := r.next(true)
				if fail {
					var dl *delta.DataLossError
					if !errors.As(err, &dl) || !errors.Is(err, delta.ErrDataLoss) || dl.Need != 3 || dl.Oldest != 20 {
						t.Fatalf("batch after retention = %v, %v; want a DataLossError needing 3, oldest 20", got, err)
					}
					t.Logf("error: %v", err)
					return
				}
				if diff := cmp.Diff(ids[20:23], got); diff != "" {
					t.Errorf("batch after retention (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestSourceRetained: a rebuild reads every commit and data file the committed batches read
// again; a data file a VACUUM removed, or commits log retention removed, say so.
func TestSourceRetained(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			r := newSourceRig(t, kind)
			private := privateStore(t)
			r.start(private, func(d *v1.DeltaSource) { d.StartingVersion = new(int64(0)); d.MaxFilesPerTrigger = new(int32(3)) })
			for i := range 12 { // a checkpoint at version 10, so that log retention can remove commits before it
				r.append(string(rune('A' + i)))
			}
			if diff := cmp.Diff([]string{"A", "B", "C"}, r.mustNext(true)); diff != "" {
				t.Fatalf("first batch (-want +got):\n%s", diff)
			}
			retained := r.src.(engine.RetainingSource)
			if err := retained.Retained(ctx, r.end); err != nil {
				t.Fatalf("Retained with everything there: %v", err)
			}
			actions, err := r.tbl.Commit(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			var file string
			for _, a := range actions {
				if a.Add != nil {
					file = a.Add.Path
				}
			}
			if err := r.tbl.Store().Delete(ctx, file); err != nil {
				t.Fatal(err)
			}
			if err := retained.Retained(ctx, r.end); err == nil || !strings.Contains(err.Error(), file+" that the committed batches read is gone") {
				t.Errorf("Retained after a VACUUM took %s: %v", file, err)
			}
			if _, err := r.tbl.CleanupLog(ctx, 10); err != nil {
				t.Fatal(err)
			}
			if err := retained.Retained(ctx, r.end); !errors.Is(err, delta.ErrDataLoss) {
				t.Errorf("Retained after log retention took commits 0–9: %v, want ErrDataLoss", err)
			}
		})
	}
}
