package source_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/source"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var schema = v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "n", Type: v1.TypeLong}}

// input is a folder of JSON files and a checkpoint folder for one source.
type input struct {
	dir, ckpt, dead string
	start           time.Time
}

func newInput(t *testing.T) *input {
	t.Helper()
	return &input{dir: t.TempDir(), ckpt: t.TempDir(), dead: t.TempDir(), start: time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)}
}

// file writes name with one record per id, modified at start+age.
func (in *input) file(t *testing.T, name string, age time.Duration, lines ...string) {
	t.Helper()
	p := filepath.Join(in.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, in.start.Add(age), in.start.Add(age)); err != nil {
		t.Fatal(err)
	}
}

func (in *input) source(t *testing.T, edit func(*v1.Source)) engine.Source {
	t.Helper()
	spec := &v1.Source{Name: "in", Files: &v1.FilesSource{Path: in.dir, Format: v1.FormatJSON}, Schema: &v1.Schema{Columns: schema}, OnMalformed: v1.MalformedFail}
	if edit != nil {
		edit(spec)
	}
	store, err := checkpoint.OpenDir(in.ckpt)
	if err != nil {
		t.Fatal(err)
	}
	s, err := source.NewFiles(context.Background(), spec, engine.SourceEnv{
		Name: "in", QueryID: "q1", Store: store,
		Open: func(loc string) (checkpoint.Store, error) { return s3.OpenFolder(loc) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func rec(id string, n int) string { return fmt.Sprintf(`{"id":%q,"n":%d}`, id, n) }

// batches plans and reads batches until no data is new, returning the ids of
// each batch's rows.
func batches(t *testing.T, s engine.Source, first int64, start engine.Offset, limit bool) ([][]string, engine.Offset) {
	t.Helper()
	ctx := context.Background()
	var out [][]string
	for b := first; ; b++ {
		p, err := s.Plan(ctx, engine.PlanRequest{Batch: b, Start: start, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		if !p.HasData {
			return out, start
		}
		res, err := s.Read(ctx, engine.ReadRequest{Batch: b, Start: start, End: p.End})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range res.Rows {
			ids = append(ids, r[0].(string))
		}
		out = append(out, ids)
		start = p.End
	}
}

func TestFilesOrderAndLimit(t *testing.T) {
	in := newInput(t)
	in.file(t, "b.json", time.Second, rec("b", 1))
	in.file(t, "a.json", time.Second, rec("a", 1))
	in.file(t, "z-old.json", 0, rec("z", 1))
	in.file(t, "sub/c.json", 2*time.Second, rec("c", 1), rec("c2", 2))
	in.file(t, "_ignored.json", 0, rec("x", 1))
	in.file(t, ".hidden.json", 0, rec("x", 1))
	s := in.source(t, func(s *v1.Source) { s.Files.MaxFilesPerTrigger = new(int32(2)) })
	got, end := batches(t, s, 0, nil, true)
	want := [][]string{{"z", "a"}, {"b", "c", "c2"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("batches (-want +got):\n%s", diff)
	}
	// A new file is read by the next batch; seen files are not read again.
	in.file(t, "d.json", -time.Hour, rec("d", 1))
	got, _ = batches(t, s, 2, end, true)
	if diff := cmp.Diff([][]string{{"d"}}, got); diff != "" {
		t.Errorf("later batches (-want +got):\n%s", diff)
	}
}

func TestFilesNoLimitTakesAll(t *testing.T) {
	in := newInput(t)
	for i := range 5 {
		in.file(t, fmt.Sprintf("f%d.json", i), time.Duration(i)*time.Second, rec(fmt.Sprint(i), i))
	}
	s := in.source(t, func(s *v1.Source) { s.Files.MaxFilesPerTrigger = new(int32(1)) })
	got, _ := batches(t, s, 0, nil, false)
	if len(got) != 1 || len(got[0]) != 5 {
		t.Fatalf("batches without limit = %v, want one with 5 rows", got)
	}
}

// TestFilesReusesLeftoverPlan checks that a run that died after recording a
// batch's files but before offsets/N leads the next run to take the same files.
func TestFilesReusesLeftoverPlan(t *testing.T) {
	ctx := context.Background()
	in := newInput(t)
	in.file(t, "a.json", 0, rec("a", 1))
	dead := in.source(t, nil)
	p, err := dead.Plan(ctx, engine.PlanRequest{Batch: 0, Limit: true})
	if err != nil || !p.HasData {
		t.Fatalf("Plan = %+v, %v", p, err)
	}
	in.file(t, "b.json", -time.Hour, rec("b", 1)) // older, and new
	got, _ := batches(t, in.source(t, nil), 0, nil, true)
	if diff := cmp.Diff([][]string{{"a"}, {"b"}}, got); diff != "" {
		t.Errorf("batches after the crash (-want +got):\n%s", diff)
	}
	// Replaying batch 0 from its logged offsets in a third process.
	res, err := in.source(t, nil).Read(ctx, engine.ReadRequest{Batch: 0, End: p.End})
	if err != nil || len(res.Rows) != 1 || res.Rows[0][0] != "a" {
		t.Fatalf("replayed batch 0 = %v, %v", res.Rows, err)
	}
}

func TestFilesAvailableNow(t *testing.T) {
	ctx := context.Background()
	in := newInput(t)
	in.file(t, "a.json", 0, rec("a", 1))
	in.file(t, "b.json", time.Second, rec("b", 1))
	s := in.source(t, func(s *v1.Source) { s.Files.MaxFilesPerTrigger = new(int32(1)) })
	if err := s.(engine.AvailableNowSource).PrepareAvailableNow(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	in.file(t, "c.json", -time.Hour, rec("c", 1)) // arrives after the start
	got, _ := batches(t, s, 0, nil, true)
	if diff := cmp.Diff([][]string{{"a"}, {"b"}}, got); diff != "" {
		t.Errorf("availableNow batches (-want +got):\n%s", diff)
	}
}

func TestFilesPurgeCompacts(t *testing.T) {
	ctx := context.Background()
	in := newInput(t)
	for i := range 4 {
		in.file(t, fmt.Sprintf("f%d.json", i), time.Duration(i)*time.Second, rec(fmt.Sprint(i), i))
	}
	s := in.source(t, func(s *v1.Source) { s.Files.MaxFilesPerTrigger = new(int32(1)) })
	_, end := batches(t, s, 0, nil, true)
	if err := s.(engine.PurgingSource).Purge(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.(engine.PurgingSource).Purge(ctx, 3); err != nil {
		t.Fatal(err)
	}
	store, _ := checkpoint.OpenDir(in.ckpt)
	keys, _ := checkpoint.ListKeys(ctx, store, "")
	want := []string{"compact/" + checkpoint.BatchName(3), "files/" + checkpoint.BatchName(3)}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("keys after purge (-want +got):\n%s", diff)
	}
	// A new run remembers the compacted files.
	in.file(t, "new.json", 0, rec("new", 1))
	got, _ := batches(t, in.source(t, nil), 4, end, true)
	if diff := cmp.Diff([][]string{{"new"}}, got); diff != "" {
		t.Errorf("batches after purge (-want +got):\n%s", diff)
	}
}

func TestFilesMalformed(t *testing.T) {
	ctx := context.Background()
	lines := []string{rec("a", 1), `{"id":"b","n":"two"}`, "garbage", rec("c", 3)}
	t.Run("fail", func(t *testing.T) {
		in := newInput(t)
		in.file(t, "bad.json", 0, lines...)
		s := in.source(t, nil)
		p, _ := s.Plan(ctx, engine.PlanRequest{Batch: 0})
		_, err := s.Read(ctx, engine.ReadRequest{Batch: 0, End: p.End})
		if !errors.Is(err, source.ErrMalformed) {
			t.Fatalf("Read = %v, want ErrMalformed", err)
		}
		if want := filepath.Join(in.dir, "bad.json") + " line 2"; !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	})
	t.Run("skip", func(t *testing.T) {
		in := newInput(t)
		in.file(t, "bad.json", 0, lines...)
		s := in.source(t, func(s *v1.Source) { s.OnMalformed = v1.MalformedSkip })
		p, _ := s.Plan(ctx, engine.PlanRequest{Batch: 0})
		res, err := s.Read(ctx, engine.ReadRequest{Batch: 0, End: p.End})
		if err != nil || len(res.Rows) != 2 || res.Malformed != 2 {
			t.Fatalf("Read = %d rows, %d malformed, %v; want 2 and 2", len(res.Rows), res.Malformed, err)
		}
	})
	t.Run("deadLetter", func(t *testing.T) {
		in := newInput(t)
		in.file(t, "bad.json", 0, lines...)
		s := in.source(t, func(s *v1.Source) { s.OnMalformed = v1.MalformedDeadLetter; s.DeadLetterPath = in.dead })
		p, _ := s.Plan(ctx, engine.PlanRequest{Batch: 0})
		res, err := s.Read(ctx, engine.ReadRequest{Batch: 0, End: p.End})
		if err != nil || len(res.Rows) != 2 || res.Malformed != 2 {
			t.Fatalf("Read = %d rows, %d malformed, %v; want 2 and 2", len(res.Rows), res.Malformed, err)
		}
		data, err := os.ReadFile(filepath.Join(in.dead, "q1", "in", checkpoint.BatchName(0)+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(got) != 2 || !strings.Contains(got[0], `"line":2`) || !strings.Contains(got[1], `"record":"garbage"`) {
			t.Errorf("dead letters:\n%s", data)
		}
	})
}

// TestFilesS3 reads files from an S3 prefix, with the seen-files log in an
// S3 checkpoint store.
func TestFilesS3(t *testing.T) {
	ctx := context.Background()
	srv := testenv.S3(t)
	cfg := srv.Options()
	in, err := s3.OpenFolder("s3://"+srv.Bucket+"/in", cfg...)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := in.Put(ctx, fmt.Sprintf("f%d.json", i), []byte(rec(fmt.Sprint(i), i)+"\n")); err != nil {
			t.Fatal(err)
		}
	}
	ck, err := checkpoint.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := source.NewFiles(ctx, &v1.Source{Name: "in", Files: &v1.FilesSource{Path: "s3://" + srv.Bucket + "/in", Format: v1.FormatJSON}, Schema: &v1.Schema{Columns: schema}},
		engine.SourceEnv{Name: "in", QueryID: "q", Store: ck, Open: func(loc string) (checkpoint.Store, error) { return s3.OpenFolder(loc, cfg...) }})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := batches(t, s, 0, nil, true)
	if len(got) != 1 || len(got[0]) != 3 {
		t.Fatalf("batches = %v, want one of 3 rows", got)
	}
}
