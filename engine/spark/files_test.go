package spark_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine/sink"
	"github.com/lockstep-dev/lockstep/engine/spark"
	"github.com/lockstep-dev/lockstep/internal/testenv"
	lplan "github.com/lockstep-dev/lockstep/plan"
)

// filesReply is the Go side's answer to the runner's files sink (engine/spark/files.go).
type filesReply struct {
	BatchID   int64  `json:"batchId"`
	Skip      bool   `json:"skip"`
	Prefix    string `json:"prefix"`
	Committed bool   `json:"committed"`
	Error     string `json:"error"`
}

// TestFilesCommit: the Go side commits what the runner's files sink wrote with the built-in
// sink's manifest code, on a local folder and on each S3 server (a conditional create): a batch
// begun gets a fresh prefix, its files are listed in its entry (a file of no rows deleted, not
// listed), a committed batch is skipped, of two attempts at one batch the first commit wins and
// the loser's files are deleted, and files not of the attempt are refused. No JVM: the requests
// are the runner's lines.
func TestFilesCommit(t *testing.T) {
	stores := []string{"local"}
	stores = append(stores, testenv.S3Kinds()...)
	for _, store := range stores {
		t.Run(store, func(t *testing.T) {
			ctx := context.Background()
			root, opts := t.TempDir(), []s3.Option(nil)
			if store != "local" {
				srv := testenv.S3Of(t, store)
				for _, kv := range srv.Env() {
					k, v, _ := strings.Cut(kv, "=")
					t.Setenv(k, v)
				}
				root, opts = "s3://"+srv.Bucket+"/"+strings.ReplaceAll(t.Name(), "/", "-"), srv.Options()
			}
			out := root + "/out"
			lp, errs := lplan.Build(qt.Make("files-commit", "spark").FilesSource("orders", t.TempDir(), v1.FormatJSON, diffColumns...).
				SelectColumns("id", "qty").FilesSink(out, v1.FormatJSON).Spec())
			if len(errs) > 0 {
				t.Fatal(errs.ToAggregate())
			}
			folder, err := s3.OpenFolder(out, opts...)
			if err != nil {
				t.Fatal(err)
			}
			attempt := func() func(op string, batch int64, files ...sink.DataFile) filesReply {
				serve, err := spark.FilesServer(ctx, lp, "q")
				if err != nil {
					t.Fatal(err)
				}
				return func(op string, batch int64, files ...sink.DataFile) filesReply {
					req, _ := json.Marshal(map[string]any{"sink": "files", "op": op, "batchId": batch, "files": files})
					var rep filesReply
					if err := json.Unmarshal(serve(string(req)), &rep); err != nil {
						t.Fatal(err)
					}
					if rep.BatchID != batch {
						t.Fatalf("%s of batch %d answered for batch %d", op, batch, rep.BatchID)
					}
					return rep
				}
			}
			write := func(name, data string) sink.DataFile {
				if err := folder.Put(ctx, name, []byte(data)); err != nil {
					t.Fatal(err)
				}
				return sink.DataFile{Path: name, Rows: int64(strings.Count(data, "\n")), Bytes: int64(len(data))}
			}

			a := attempt()
			begun := a("begin", 0)
			if begun.Skip || begun.Error != "" || !strings.HasPrefix(begun.Prefix, "part-q-00000000000000000000-") {
				t.Fatalf("begin of batch 0 = %+v, want a prefix part-q-<batch>-<attempt>", begun)
			}
			full := write(begun.Prefix+"-00000-0-c000.json", `{"id":"a","qty":1}`+"\n"+`{"id":"b","qty":2}`+"\n")
			empty := write(begun.Prefix+"-00001-0-c000.json", "")
			if rep := a("commit", 0, full, empty); !rep.Committed || rep.Error != "" {
				t.Fatalf("commit of batch 0 = %+v", rep)
			}
			ms, err := sink.ReadManifest(ctx, folder)
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) != 1 || ms[0].QueryID != "q" || ms[0].BatchID != 0 || len(ms[0].Files) != 1 || ms[0].Files[0] != full || ms[0].Format != v1.FormatJSON {
				t.Fatalf("manifest = %+v, want batch 0 of q listing %+v", ms, full)
			}
			if _, err := folder.Get(ctx, empty.Path); !errors.Is(err, checkpoint.ErrNotFound) {
				t.Errorf("the data file of no rows is still there (%v): it is listed nowhere", err)
			}
			if _, rows, err := sink.ReadRows(ctx, folder); err != nil || len(rows) != 2 {
				t.Fatalf("read %d rows (%v), want 2", len(rows), err)
			}
			if rep := attempt()("begin", 0); !rep.Skip || rep.Prefix != "" {
				t.Errorf("begin of committed batch 0 = %+v, want skip", rep)
			}

			// Two attempts at batch 1: the first commit wins, the loser's files go.
			first, second := attempt(), attempt()
			p1, p2 := first("begin", 1).Prefix, second("begin", 1).Prefix
			if p1 == "" || p1 == p2 {
				t.Fatalf("two attempts at batch 1 got prefixes %q and %q, want two", p1, p2)
			}
			won := write(p1+"-00000-0-c000.json", `{"id":"c","qty":3}`+"\n")
			lost := write(p2+"-00000-0-c000.json", `{"id":"d","qty":4}`+"\n")
			if rep := first("commit", 1, won); !rep.Committed {
				t.Fatalf("first commit of batch 1 = %+v", rep)
			}
			if rep := second("commit", 1, lost); !rep.Committed || rep.Error != "" {
				t.Fatalf("second commit of batch 1 = %+v, want committed (by the first)", rep)
			}
			if _, err := folder.Get(ctx, lost.Path); !errors.Is(err, checkpoint.ErrNotFound) {
				t.Errorf("the losing attempt's file is still there (%v)", err)
			}
			if _, rows, err := sink.ReadRows(ctx, folder); err != nil || len(rows) != 3 || rows[2][0] != "c" {
				t.Fatalf("read %v (%v), want a, b, then c", rows, err)
			}

			// What the Go side refuses: a commit it did not begin, a file of another attempt.
			bad := attempt()
			if rep := bad("commit", 2, won); rep.Committed || !strings.Contains(rep.Error, "did not begin") {
				t.Errorf("commit of batch 2, never begun = %+v, want an error", rep)
			}
			bad("begin", 2)
			if rep := bad("commit", 2, sink.DataFile{Path: "../" + won.Path, Rows: 1}); rep.Committed || !strings.Contains(rep.Error, "not one of") {
				t.Errorf("commit of another attempt's file = %+v, want an error", rep)
			}
			if rep := bad("begin", 2); rep.Skip {
				t.Errorf("batch 2 was committed by a refused commit: %+v", rep)
			}
		})
	}
}
