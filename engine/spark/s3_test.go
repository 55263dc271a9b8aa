package spark_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/minio/minio-go/v7"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine/blob"
	"github.com/lockstep-dev/lockstep/engine/sink"
	"github.com/lockstep-dev/lockstep/engine/spark"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestS3: the checkpoint and the files sink on versitygw and MinIO (s3:// becomes s3a:// with
// the endpoint, path-style access and the keys of Lockstep's S3 variables): both runtimes
// write the same rows, and Lockstep's records sit in _lockstep/ beside Spark's checkpoint.
func TestS3(t *testing.T) {
	runner := testenv.SparkRunner(t)
	for _, kind := range testenv.S3Kinds() {
		t.Run(kind, func(t *testing.T) { testS3(t, runner, testenv.S3Of(t, kind)) })
	}
}

func testS3(t *testing.T, runner spark.Runner, srv *testenv.S3Server) {
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	ctx := context.Background()
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	writeInput(t, in)
	root := "s3://" + srv.Bucket
	query := func(name string) *v1.StreamingQuery {
		return qt.Make("s3-"+name, "diff").FilesSource("orders", in, v1.FormatJSON, diffColumns...).
			Filter("amount > 1").SelectColumns("id", "qty", "ts").
			FilesSink(root+"/out-"+name, v1.FormatJSON).AvailableNow().Checkpoint(root + "/ck-" + name).Obj()
	}
	runBuiltin(t, ctx, query("lockstep"))
	runSpark(t, ctx, runner, query("spark"))
	read := func(name string) []string {
		folder, err := blob.Open(root+"/out-"+name, srv.Options()...)
		if err != nil {
			t.Fatal(err)
		}
		cols, rows, err := sink.ReadRows(ctx, folder)
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		var out []string
		for _, r := range rows {
			s := ""
			for i, v := range r {
				s += cols[i].Name + "=" + formatValue(v) + " "
			}
			out = append(out, s)
		}
		slices.Sort(out)
		return out
	}
	want, got := read("lockstep"), read("spark")
	if len(want) == 0 {
		t.Fatal("the built-in engine wrote no rows")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("output on spark differs (-lockstep +spark):\n%s", diff)
	}
	var keys []string
	for obj := range srv.Client(t).ListObjects(ctx, srv.Bucket, minioListAll("ck-spark/")) {
		keys = append(keys, obj.Key)
	}
	for _, want := range []string{"ck-spark/_lockstep/metadata", "ck-spark/metadata", "ck-spark/commits/0"} {
		if !slices.Contains(keys, want) {
			t.Errorf("checkpoint on S3 lacks %s; it holds %v", want, keys)
		}
	}
}

func minioListAll(prefix string) minio.ListObjectsOptions {
	return minio.ListObjectsOptions{Prefix: prefix, Recursive: true}
}
