package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/minio/minio-go/v7"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// envUpdateGolden rewrites the golden files instead of comparing:
//
//	LOCKSTEP_UPDATE_GOLDEN=1 go test ./cmd/lockstep -run TestCheckpoint
const envUpdateGolden = "LOCKSTEP_UPDATE_GOLDEN"

// runCheckpointCmd runs lockstep with args and returns its standard output, followed by the
// error main would print, and its exit code.
func runCheckpointCmd(t *testing.T, args ...string) (stdout string, code int) {
	t.Helper()
	out, _, err := runRoot(t, args...)
	if err != nil {
		out += "Error: " + err.Error() + "\n"
	}
	return out, codeOf(err)
}

// writeCheckpoint builds what an engine leaves behind in store: batches 0 to
// 11 committed with a retention of 5, batch 12 planned, two state partitions
// of one operator, and a shape change at batch 8.
func writeTestCheckpoint(t *testing.T, store checkpoint.Store) *checkpoint.Checkpoint {
	t.Helper()
	ctx := t.Context()
	created := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	c, err := checkpoint.Claim(ctx, store, checkpoint.Owner{Namespace: "payments", Name: "revenue-by-country", UID: "uid-1"},
		checkpoint.WithClock(func() time.Time { return created }))
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.RecordShape(ctx, 0, []byte(`{"sources":["orders"]}`)))
	for b := int64(0); b <= 12; b++ {
		if b == 8 {
			must(c.RecordShape(ctx, 8, []byte(`{"sources":["orders","refunds"]}`)))
		}
		must(c.AddOffsets(ctx, checkpoint.Offsets{
			BatchID:          b,
			BatchWatermarkMs: 1_777_636_800_000 + 60_000*b,
			BatchTimestampMs: 1_777_637_400_000 + 60_000*b,
			Conf:             map[string]string{"lockstep.stateStore.partitions": "2"},
			Sources: []checkpoint.SourceOffset{
				{Source: "orders", Offset: json.RawMessage(fmt.Sprintf(`{"orders":{"0":%d,"1":%d}}`, 100*b, 90*b))},
				{Source: "refunds", Offset: json.RawMessage(fmt.Sprintf(`{"logOffset":%d}`, b))},
			},
		}))
		for part := range 2 {
			f := checkpoint.StateFile{Operator: "revenue", Partition: part, Version: b + 1, Kind: checkpoint.StateDelta}
			must(store.Create(ctx, f.Key(), []byte("0123456789")))
		}
		if b == 12 {
			break // planned, not committed
		}
		must(c.AddCommit(ctx, checkpoint.Commit{
			BatchID:              b,
			NextBatchWatermarkMs: 1_777_636_800_000 + 60_000*(b+1),
			Progress: checkpoint.Progress{
				Timestamp:     created.Add(time.Duration(b) * time.Minute),
				NumInputRows:  190,
				NumOutputRows: 3,
				DurationMs:    map[string]int64{"triggerExecution": 250 + b},
			},
		}))
		if b == 5 {
			f := checkpoint.StateFile{Operator: "revenue", Partition: 0, Version: 6, Kind: checkpoint.StateSnapshot}
			must(store.Create(ctx, f.Key(), []byte("snapshot!")))
		}
	}
	must(store.Put(ctx, checkpoint.StateMetadataKey("revenue"), []byte(`{"kind":"aggregate"}`)))
	if _, err := c.Purge(ctx, 5, checkpoint.PurgeState); err != nil {
		t.Fatal(err)
	}
	return c
}

func localTestCheckpoint(t *testing.T) (string, *checkpoint.Checkpoint) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ckpt")
	d, err := checkpoint.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, writeTestCheckpoint(t, d)
}

// checkCheckpointCmd runs lockstep checkpoint sub on location and compares its output with
// testdata/checkpoint-SUB.golden (checkCheckpointGolden).
func checkCheckpointCmd(t *testing.T, sub, location, queryID string) {
	t.Helper()
	out, code := runCheckpointCmd(t, "checkpoint", sub, location)
	if code != exitOK {
		t.Fatalf("%s exit %d:\n%s", sub, code, out)
	}
	checkCheckpointGolden(t, "checkpoint-"+sub+".golden", out, location, queryID)
}

// checkCheckpointGolden compares got, with the location and query id replaced by
// placeholders, with testdata/name.
func checkCheckpointGolden(t *testing.T, name, got, location, queryID string) {
	t.Helper()
	got = strings.ReplaceAll(got, location, "LOCATION")
	got = strings.ReplaceAll(got, queryID, "QUERY-ID")
	path := filepath.Join("testdata", name)
	if os.Getenv(envUpdateGolden) != "" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (set %s=1 to create it)", err, envUpdateGolden)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("output differs from %s (-want +got):\n%s", path, diff)
	}
}

func TestCheckpointDescribe(t *testing.T) {
	dir, c := localTestCheckpoint(t)
	checkCheckpointCmd(t, "describe", dir, c.Metadata().ID)
}

func TestCheckpointDescribeJSON(t *testing.T) {
	dir, c := localTestCheckpoint(t)
	out, code := runCheckpointCmd(t, "checkpoint", "describe", "-o", "json", dir)
	if code != exitOK {
		t.Fatalf("describe exit %d:\n%s", code, out)
	}
	var got struct {
		Location string `json:"location"`
		Metadata struct {
			ID            string `json:"id"`
			FormatVersion int    `json:"formatVersion"`
			Owner         struct{ Namespace, Name, UID string }
		} `json:"metadata"`
		PlannedBatch, CommittedBatch, NextBatch, OldestRetainedBatch int64
		ReplayOnRestart                                              bool
		RetainedBatches                                              int
		Planned                                                      struct {
			Sources []struct{ Source string }
		}
		State []struct {
			Operator                      string
			Partitions, Deltas, Snapshots int
			MinVersion, MaxVersion        int64
			Files                         int
			Bytes                         int64
		}
		Shape struct {
			Batch int64
			Shape json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("describe -o json is not JSON: %v\n%s", err, out)
	}
	checks := []struct {
		field     string
		got, want any
	}{
		{"location", got.Location, dir},
		{"metadata.id", got.Metadata.ID, c.Metadata().ID},
		{"metadata.formatVersion", got.Metadata.FormatVersion, 1},
		{"metadata.owner.name", got.Metadata.Owner.Name, "revenue-by-country"},
		{"plannedBatch", got.PlannedBatch, int64(12)},
		{"committedBatch", got.CommittedBatch, int64(11)},
		{"replayOnRestart", got.ReplayOnRestart, true},
		{"nextBatch", got.NextBatch, int64(12)},
		{"oldestRetainedBatch", got.OldestRetainedBatch, int64(7)},
		{"retainedBatches", got.RetainedBatches, 6},
		{"planned.sources", len(got.Planned.Sources), 2},
		{"state", len(got.State), 1},
		{"shape.batch", got.Shape.Batch, int64(8)},
		{"shape.shape", compactJSON(t, got.Shape.Shape), `{"sources":["orders","refunds"]}`},
	}
	if len(got.State) == 1 {
		s := got.State[0]
		// Partition 0 keeps snapshot 6 and the deltas from 6 on; partition 1 never snapshotted.
		checks = append(checks, []struct {
			field     string
			got, want any
		}{
			{"state[0].operator", s.Operator, "revenue"},
			{"state[0].partitions", s.Partitions, 2},
			{"state[0].minVersion", s.MinVersion, int64(1)},
			{"state[0].maxVersion", s.MaxVersion, int64(13)},
			{"state[0].deltas", s.Deltas, 8 + 13},
			{"state[0].snapshots", s.Snapshots, 1},
			{"state[0].files", s.Files, 8 + 13 + 1 + 1},
			{"state[0].bytes", s.Bytes, int64(21*10 + 9 + len(`{"kind":"aggregate"}`))},
		}...)
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("describe -o json: %s = %v, want %v", c.field, c.got, c.want)
		}
	}
}

func TestCheckpointBatches(t *testing.T) {
	dir, c := localTestCheckpoint(t)
	checkCheckpointCmd(t, "batches", dir, c.Metadata().ID)

	out, code := runCheckpointCmd(t, "checkpoint", "batches", "--output=json", dir)
	if code != exitOK {
		t.Fatalf("batches -o json exit %d:\n%s", code, out)
	}
	var got struct {
		QueryID string `json:"queryId"`
		Batches []struct {
			ID      int64            `json:"id"`
			Offsets *json.RawMessage `json:"offsets"`
			Commit  *struct {
				NextBatchWatermarkMs int64 `json:"nextBatchWatermarkMs"`
				Progress             struct {
					NumInputRows int64 `json:"numInputRows"`
				} `json:"progress"`
			} `json:"commit"`
		} `json:"batches"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("batches -o json is not JSON: %v\n%s", err, out)
	}
	var ids []int64
	for _, b := range got.Batches {
		ids = append(ids, b.ID)
		if b.Offsets == nil {
			t.Errorf("batch %d has no offsets", b.ID)
		}
		if (b.Commit != nil) != (b.ID < 12) {
			t.Errorf("batch %d: commit %v, want one exactly for batches before 12", b.ID, b.Commit)
		}
	}
	if diff := cmp.Diff([]int64{7, 8, 9, 10, 11, 12}, ids); diff != "" || got.QueryID != c.Metadata().ID {
		t.Errorf("batches -o json: ids (-want +got):\n%s\nquery id %s, want %s", diff, got.QueryID, c.Metadata().ID)
	}
}

func TestCheckpointNewLocation(t *testing.T) {
	dir := t.TempDir()
	d, err := checkpoint.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Claim(t.Context(), d, checkpoint.Owner{Name: "fresh"}); err != nil {
		t.Fatal(err)
	}
	out, code := runCheckpointCmd(t, "checkpoint", "describe", dir)
	if code != exitOK || !strings.Contains(out, "Planned batch:    none") || !strings.Contains(out, "start at batch 0") {
		t.Errorf("describe of a new checkpoint (exit %d):\n%s", code, out)
	}
	out, code = runCheckpointCmd(t, "checkpoint", "batches", "file://"+dir)
	if code != exitOK || out != "No batches.\n" {
		t.Errorf("batches of a new checkpoint (exit %d): %q", code, out)
	}
}

func TestCheckpointRelativeLocation(t *testing.T) {
	dir, _ := localTestCheckpoint(t)
	t.Chdir(filepath.Dir(dir))
	out, code := runCheckpointCmd(t, "checkpoint", "describe", filepath.Base(dir))
	if code != exitOK || !strings.Contains(out, "Location:         "+dir+"\n") {
		t.Errorf("describe of a relative path (exit %d):\n%s", code, out)
	}
}

func TestCheckpointBadInput(t *testing.T) {
	dir, _ := localTestCheckpoint(t)
	damaged, _ := localTestCheckpoint(t)
	if err := os.WriteFile(filepath.Join(damaged, "offsets", "00000000000000000012"), []byte("v1\n{\"batchWatermarkMs\":"), 0o644); err != nil {
		t.Fatal(err)
	}
	newer, _ := localTestCheckpoint(t)
	if err := os.WriteFile(filepath.Join(newer, "commits", "00000000000000000011"), []byte("v2\n{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"malformed location", []string{"describe", "s3:/bucket/q"}, exitInvalid, "invalid checkpoint location"},
		{"unknown scheme", []string{"batches", "gs://bucket/q"}, exitInvalid, `unknown scheme "gs"`},
		{"bad bucket name", []string{"describe", "s3://Bad_Bucket/q"}, exitInvalid, "bucket name"},
		{"no checkpoint", []string{"describe", empty}, exitFailure, "no checkpoint at " + empty},
		{"damaged offsets", []string{"describe", damaged}, exitFailure, filepath.Join(damaged, "offsets", "00000000000000000012") + ": checkpoint is damaged"},
		{"damaged offsets in batches", []string{"batches", damaged}, exitFailure, "offsets/00000000000000000012"},
		{"newer format", []string{"describe", newer}, exitFailure, "newer lockstep"},
		{"bad output", []string{"describe", "-o", "yaml", dir}, exitInvalid, `--output "yaml": want text or json`},
		{"no location", []string{"describe"}, exitFailure, "accepts 1 arg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := runCheckpointCmd(t, append([]string{"checkpoint"}, tc.args...)...)
			if code != tc.code || !strings.Contains(out, tc.says) {
				t.Errorf("lockstep checkpoint %s: exit %d, output:\n%s\nwant exit %d and %q", strings.Join(tc.args, " "), code, out, tc.code, tc.says)
			}
		})
	}
}

// On S3 the commands read with the environment's settings and write
// nothing, not even Open's scratch object.
func TestCheckpointOnS3(t *testing.T) {
	srv, location, store := s3TestStore(t)
	c := writeTestCheckpoint(t, store)
	before := bucketObjects(t, srv)

	checkCheckpointCmd(t, "describe", location, c.Metadata().ID)
	if out, code := runCheckpointCmd(t, "checkpoint", "batches", location); code != exitOK || !strings.Contains(out, "\n12 ") {
		t.Errorf("batches exit %d:\n%s", code, out)
	}
	if after := bucketObjects(t, srv); !cmp.Equal(before, after) {
		t.Errorf("the commands changed the bucket:\n%s", cmp.Diff(before, after))
	}

	t.Setenv(s3.EnvSecretKey, "wrong")
	if out, code := runCheckpointCmd(t, "checkpoint", "describe", location); code != exitFailure || !strings.Contains(out, "rejected the credentials") {
		t.Errorf("describe with a wrong secret: exit %d:\n%s", code, out)
	}
}

// s3TestStore starts a test S3 server, points the process's environment at it, and opens
// the store of the checkpoint location s3://<bucket>/payments/revenue on it.
func s3TestStore(t *testing.T) (*testenv.S3Server, string, checkpoint.Store) {
	t.Helper()
	srv := testenv.S3(t)
	srv.Setenv(t)
	location := "s3://" + srv.Bucket + "/payments/revenue"
	store, err := checkpoint.Open(t.Context(), location, checkpoint.WithS3(s3.Opener()))
	if err != nil {
		t.Fatal(err)
	}
	return srv, location, store
}

func bucketObjects(t *testing.T, srv *testenv.S3Server) map[string]string {
	t.Helper()
	m := map[string]string{}
	for obj := range srv.Client(t).ListObjectsIter(t.Context(), srv.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		m[obj.Key] = obj.ETag
	}
	return m
}

func compactJSON(t *testing.T, raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Errorf("compact %s: %v", raw, err)
	}
	return b.String()
}
