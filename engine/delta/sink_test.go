package delta_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/delta"
	"github.com/lockstep-dev/lockstep/engine/delta/deltatest"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// tableLocation is a fresh table location of a kind, with the engine's
// folder opener for it.
type tableLocation struct {
	path string
	open engine.FolderOpener
}

func newTableLocation(t *testing.T, kind string) tableLocation {
	t.Helper()
	if kind == "local" {
		return tableLocation{path: t.TempDir(), open: func(loc string) (checkpoint.Store, error) { return s3.OpenFolder(loc) }}
	}
	srv := testenv.S3(t)
	cfg := srv.Options()
	return tableLocation{path: "s3://" + srv.Bucket + "/lake/table", open: func(loc string) (checkpoint.Store, error) { return s3.OpenFolder(loc, cfg...) }}
}

func (l tableLocation) table(t testing.TB) *delta.Table {
	t.Helper()
	f, err := l.open(l.path)
	if err != nil {
		t.Fatal(err)
	}
	return delta.Open(f)
}

func (l tableLocation) rows(t testing.TB) []engine.Row {
	t.Helper()
	_, rows := tableContent(t, l.table(t))
	return rows
}

func newSink(t *testing.T, l tableLocation, cols v1.Columns, mode v1.OutputMode, partitions ...string) engine.Sink {
	t.Helper()
	var keys []string
	if mode == v1.OutputUpdate {
		keys = enginetest.SinkKeys
	}
	s, err := delta.NewSink(context.Background(), &v1.Sink{Delta: &v1.DeltaSink{Path: l.path, PartitionColumns: partitions}},
		engine.SinkEnv{QueryID: "unused", Columns: cols, OutputMode: mode, Keys: keys, Open: l.open})
	if err != nil {
		t.Fatalf("NewSink() error = %v", err)
	}
	return s
}

// The delta sink passes the engine's exactly-once sink suite: replaying
// batch N is harmless, and a fresh query id is neither skipped nor skips.
func TestSinkSuite(t *testing.T) {
	for _, kind := range storeKinds {
		for _, mode := range []v1.OutputMode{v1.OutputAppend, v1.OutputUpdate} {
			t.Run(kind+"/"+string(mode), func(t *testing.T) {
				enginetest.RunSinkSuite(t, func(t *testing.T) enginetest.SinkHarness {
					l := newTableLocation(t, kind)
					return enginetest.SinkHarness{
						New:    func(t *testing.T) engine.Sink { return newSink(t, l, enginetest.SinkColumns, mode) },
						Read:   func(t *testing.T) []engine.Row { return l.rows(t) },
						Upsert: mode == v1.OutputUpdate,
					}
				})
			})
		}
	}
}

func TestSinkRefuses(t *testing.T) {
	l := newTableLocation(t, "local")
	cols := v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "n", Type: v1.TypeLong}}
	if err := newSink(t, l, cols, v1.OutputAppend).Write(context.Background(), &engine.Batch{QueryID: "q", ID: 0, Columns: cols, Rows: []engine.Row{{"a", int64(1)}}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		cols    v1.Columns
		mode    v1.OutputMode
		wantErr error
	}{
		{"update mode without keys", cols, v1.OutputUpdate, nil},
		{"a changed column type", v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "n", Type: v1.TypeDouble}}, v1.OutputAppend, delta.ErrSchemaMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := delta.NewSink(context.Background(), &v1.Sink{Delta: &v1.DeltaSink{Path: l.path}},
				engine.SinkEnv{QueryID: "q", Columns: tc.cols, OutputMode: tc.mode, Open: l.open})
			if err == nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("NewSink() error = %v, want %v", err, tc.wantErr)
			}
			t.Logf("NewSink() error = %v", err)
		})
	}
}

// TestSinkFaults aims each fault an object store produces (a lost reply, 503
// SlowDown, 500, a reset, a delay) at each of the sink's operations on S3 —
// the data files, the commit, the reads of the log — on versitygw and MinIO:
// every batch lands exactly once and every version of the table reads (no
// file a commit references is missing).
func TestSinkFaults(t *testing.T) {
	targets := []enginetest.FaultTarget{
		{Name: "data-file", Match: testenv.Match{Method: "PUT", Key: `\.parquet$`}},
		{Name: "commit", Match: testenv.Match{Method: "PUT", Key: `_delta_log/\d+\.json$`, IfNoneMatch: true}},
		{Name: "log-read", Match: testenv.Match{Method: "GET", Key: `_delta_log`}},
	}
	enginetest.RunSinkFaultsOnS3(t, targets, func(t *testing.T, srv *testenv.S3Server, opts []s3.Option, n int) enginetest.SinkHarness {
		l := tableLocation{path: fmt.Sprintf("s3://%s/lake/faults%d", srv.Bucket, n),
			open: func(loc string) (checkpoint.Store, error) { return s3.OpenFolder(loc, opts...) }}
		return enginetest.SinkHarness{
			New: func(t *testing.T) engine.Sink { return newSink(t, l, enginetest.SinkColumns, v1.OutputAppend) },
			Read: func(t *testing.T) []engine.Row {
				everyVersionReads(t, l.table(t))
				return l.rows(t)
			},
		}
	})
}

// everyVersionReads reads the table at each of its versions (time travel):
// a data file that a commit references and that is missing fails t.
func everyVersionReads(t testing.TB, tbl *delta.Table) {
	t.Helper()
	for _, s := range deltatest.Snapshots(t, tbl) {
		if _, _, err := tbl.ReadAll(context.Background(), s); err != nil {
			t.Errorf("read version %d: %v", s.Version, err)
		}
	}
}
