package sink_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/engine/sink"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func filesHarness(location string, cfg []s3.Option, format v1.FileFormat) enginetest.SinkHarness {
	open := func(loc string) (checkpoint.Store, error) { return s3.OpenFolder(loc, cfg...) }
	return enginetest.SinkHarness{
		New: func(t *testing.T) engine.Sink {
			s, err := sink.NewFiles(context.Background(), &v1.Sink{Files: &v1.FilesSink{Path: location, Format: format}},
				engine.SinkEnv{Columns: enginetest.SinkColumns, Open: open})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Read: func(t *testing.T) []engine.Row {
			f, err := open(location)
			if err != nil {
				t.Fatal(err)
			}
			return enginetest.OutputRows(t, f)
		},
	}
}

func TestFilesSinkLocal(t *testing.T) {
	for _, format := range []v1.FileFormat{v1.FormatParquet, v1.FormatJSON} {
		t.Run(string(format), func(t *testing.T) {
			enginetest.RunSinkSuite(t, func(t *testing.T) enginetest.SinkHarness {
				return filesHarness(t.TempDir(), nil, format)
			})
		})
	}
}

func TestFilesSinkS3(t *testing.T) {
	s := testenv.S3(t)
	cfg := s.Options()
	n := 0
	enginetest.RunSinkSuite(t, func(t *testing.T) enginetest.SinkHarness {
		n++
		return filesHarness(fmt.Sprintf("s3://%s/out%d", s.Bucket, n), cfg, v1.FormatParquet)
	})
}

// TestFilesSinkIgnoresUnlistedFiles checks that readers trust only the
// manifest: a data file left by a crash before the manifest is not read.
func TestFilesSinkIgnoresUnlistedFiles(t *testing.T) {
	dir := t.TempDir()
	h := filesHarness(dir, nil, v1.FormatJSON)
	f, _ := s3.OpenFolder(dir)
	if err := f.Put(context.Background(), "part-q-00000000000000000000-dead.json", []byte(`{"id":"orphan","n":1}`+"\n")); err != nil {
		t.Fatal(err)
	}
	if got := h.Read(t); len(got) != 0 {
		t.Fatalf("read %v, want nothing", got)
	}
}

func TestFilesSinkCallsHookBeforeCommit(t *testing.T) {
	dir := t.TempDir()
	var reached []engine.Phase
	s, err := sink.NewFiles(context.Background(), &v1.Sink{Files: &v1.FilesSink{Path: dir}}, engine.SinkEnv{
		Open:    func(loc string) (checkpoint.Store, error) { return s3.OpenFolder(loc) },
		Reached: func(p engine.Phase, _ int64) { reached = append(reached, p) },
	})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := s3.OpenFolder(dir)
	err = s.Write(context.Background(), &engine.Batch{QueryID: "q", ID: 3, Columns: enginetest.SinkColumns, Rows: []engine.Row{{"a", int64(1)}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(reached) != 1 || reached[0] != engine.PhaseSinkWrite {
		t.Fatalf("reached %v, want [%s]", reached, engine.PhaseSinkWrite)
	}
	ms, err := sink.ReadManifest(context.Background(), f)
	if err != nil || len(ms) != 1 || ms[0].BatchID != 3 || len(ms[0].Files) != 1 || ms[0].Files[0].Rows != 1 {
		t.Fatalf("manifest = %+v, %v", ms, err)
	}
	if !strings.Contains(ms[0].Files[0].Path, "q-00000000000000000003") {
		t.Errorf("data file %s is not named by query id and batch", ms[0].Files[0].Path)
	}
}

func TestConsole(t *testing.T) {
	var out bytes.Buffer
	s, err := sink.NewConsole(context.Background(), &v1.Sink{Console: &v1.ConsoleSink{}}, engine.SinkEnv{Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	cols := v1.Columns{{Name: "value", Type: v1.TypeLong}, {Name: "label", Type: v1.TypeString}, {Name: "at", Type: v1.TypeTimestamp}}
	var rows []engine.Row
	for i := range 22 {
		rows = append(rows, engine.Row{int64(i), "a-rather-long-label-that-is-cut", time.Date(2026, 1, 5, 10, 0, i, 0, time.UTC)})
	}
	rows[1][1] = nil
	if err := s.Write(context.Background(), &engine.Batch{ID: 7, Columns: cols, Rows: rows}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"Batch: 7\n",
		"|value|               label|                     at|\n",
		"|    0|a-rather-long-lab...|2026-01-05 10:00:00.000|\n",
		"|    1|                null|2026-01-05 10:00:01.000|\n",
		"only showing top 20 of 22 rows\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

// TestFilesSinkFaults aims each fault an object store produces at each of
// the sink's operations on S3 — the data file, the manifest entry, the read
// of the manifest — on versitygw and MinIO: every batch lands exactly once
// and every file the manifest names exists.
func TestFilesSinkFaults(t *testing.T) {
	targets := []enginetest.FaultTarget{
		{Name: "data-file", Match: testenv.Match{Method: "PUT", Key: `/part-`}},
		{Name: "manifest", Match: testenv.Match{Method: "PUT", Key: sink.ManifestDir + "/", IfNoneMatch: true}},
		{Name: "manifest-read", Match: testenv.Match{Method: "GET", Key: sink.ManifestDir + "/"}},
	}
	enginetest.RunSinkFaultsOnS3(t, targets, func(t *testing.T, srv *testenv.S3Server, opts []s3.Option, n int) enginetest.SinkHarness {
		return filesHarness(fmt.Sprintf("s3://%s/faults%d", srv.Bucket, n), opts, v1.FormatParquet)
	})
}
