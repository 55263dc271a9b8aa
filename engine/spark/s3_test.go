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
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/checkpoint/sparkckpt"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/sink"
	"github.com/lockstep-dev/lockstep/engine/spark"
	"github.com/lockstep-dev/lockstep/engine/spark/sparktest"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestS3: the checkpoint and the files sink on versitygw and MinIO (s3:// becomes s3a:// with
// the endpoint, path-style access and the keys of Lockstep's S3 variables): both runtimes
// write the same rows, Lockstep's records sit in _lockstep/ beside Spark's checkpoint, and the
// checkpoint Spark wrote through S3A reads back through Lockstep's own S3 store (the one the
// CLI opens) with sparkckpt: its query id, offsets, commits and the dedup's state schema.
func TestS3(t *testing.T) {
	runner := sparktest.Runner(t)
	for _, kind := range testenv.S3Kinds() {
		t.Run(kind, func(t *testing.T) { testS3(t, runner, testenv.S3Of(t, kind)) })
	}
}

// TestS3OverTLS: TestS3 with the S3 server behind TLS, its certificate signed by a CA only the
// environment's CA bundle ($AWS_CA_BUNDLE) holds: the built-in runtime trusts it through
// checkpoint/s3's client, Spark's S3A through the trust store the runner's JVM is given
// (s3.Settings.TrustStore, s3.JavaTrustOptions).
func TestS3OverTLS(t *testing.T) {
	runner := sparktest.Runner(t)
	testS3(t, runner, testenv.S3TLS(t, testenv.S3(t)))
}

// TestS3AConf: S3A's settings are derived from s3.Settings as checkpoint/s3's client uses them:
// the one region default, path-style access on every server but AWS S3, TLS as the endpoint
// says, the credentials provider the settings' credentials call for.
func TestS3AConf(t *testing.T) {
	const p = "spark.hadoop.fs.s3a."
	for _, tt := range []struct {
		name string
		st   s3.Settings
		want map[string]string
	}{
		{"aws", s3.Settings{}, map[string]string{p + "endpoint.region": s3.DefaultRegion}},
		{"minio over tls", s3.Settings{Endpoint: "https://minio:9000", Region: "eu-west-1", AccessKey: "id", SecretKey: "k", CAFile: "/ca.pem"}, map[string]string{
			p + "endpoint.region": "eu-west-1", p + "endpoint": "https://minio:9000", p + "path.style.access": "true", p + "connection.ssl.enabled": "true",
			p + "aws.credentials.provider": "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider",
		}},
		{"web identity", s3.Settings{Endpoint: "http://s3.test:7070", WebIdentityTokenFile: "/token"}, map[string]string{
			p + "endpoint.region": s3.DefaultRegion, p + "endpoint": "http://s3.test:7070", p + "path.style.access": "true", p + "connection.ssl.enabled": "false",
			p + "aws.credentials.provider": "software.amazon.awssdk.auth.credentials.WebIdentityTokenFileCredentialsProvider",
		}},
	} {
		got := spark.S3AConf(tt.st)
		for _, k := range []string{"checksum.generation", "create.checksum.algorithm", "request.md5.header", "change.detection.version.required"} {
			delete(got, p+k)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: S3AConf (-want +got):\n%s", tt.name, diff)
		}
	}
	opts := strings.Join(s3.JavaTrustOptions("/tmp/x/"+spark.TrustStoreFile), " ")
	for _, want := range []string{"-Djavax.net.ssl.trustStore=/tmp/x/truststore.p12", "-Djavax.net.ssl.trustStoreType=PKCS12", "-Djavax.net.ssl.trustStorePassword=" + s3.TrustStorePassword} {
		if !strings.Contains(opts, want) {
			t.Errorf("JavaTrustOptions = %s, want %s", opts, want)
		}
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
			Filter("amount > 1").DropDuplicates("", "id", "qty").SelectColumns("id", "qty", "ts").
			FilesSink(root+"/out-"+name, v1.FormatJSON).AvailableNow().Checkpoint(root + "/ck-" + name).Obj()
	}
	runBuiltin(t, ctx, query("lockstep"))
	sum := runSpark(t, ctx, runner, query("spark"))
	read := func(name string) []string {
		folder, err := s3.OpenFolder(root+"/out-"+name, srv.Options()...)
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
	checkSparkCheckpointOnS3(t, ctx, root+"/ck-spark", sum)
}

// checkSparkCheckpointOnS3 reads the checkpoint Spark wrote at location through the S3 store
// the CLI opens (read-only, the environment's settings) and checks what sparkckpt finds
// against what the run reported.
func checkSparkCheckpointOnS3(t *testing.T, ctx context.Context, location string, sum engine.Summary) {
	t.Helper()
	loc, err := checkpoint.ParseLocation(location)
	if err != nil {
		t.Fatal(err)
	}
	store, err := checkpoint.OpenLocation(ctx, loc, checkpoint.WithS3(s3.Opener(s3.ReadOnly())))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := sparkckpt.IsSparkCheckpoint(ctx, store); !ok || err != nil {
		t.Fatalf("IsSparkCheckpoint(%s) = %v, %v; want true", location, ok, err)
	}
	c, err := sparkckpt.Read(ctx, store)
	if err != nil {
		t.Fatalf("read the Spark checkpoint on S3: %v", err)
	}
	if c.Metadata.ID != sum.QueryID {
		t.Errorf("Spark's query id on S3 = %q, want the run's %q", c.Metadata.ID, sum.QueryID)
	}
	if c.Latest == nil || c.LatestCommit == nil || c.LatestCommit.BatchID != sum.LastCommitted || c.Latest.BatchID != sum.LastCommitted {
		t.Fatalf("newest offsets %+v and commit %+v, want batch %d", c.Latest, c.LatestCommit, sum.LastCommitted)
	}
	if !slices.Contains(c.Committed, 0) || c.Latest.Conf["spark.sql.shuffle.partitions"] == "" {
		t.Errorf("committed %v, pinned %v: want batch 0 and the shuffle partitions", c.Committed, c.Latest.Conf)
	}
	if len(c.Sources) != 1 {
		t.Fatalf("sources = %+v, want the files source", c.Sources)
	}
	src := c.Sources[0]
	if src.Kind != string(v1.SourceFiles) || !strings.Contains(string(src.Offset), "logOffset") || src.Files != len(diffInput) {
		t.Errorf("source = %+v, want files with a logOffset and %d files", src, len(diffInput))
	}
	if c.Latest.Version >= 2 && src.ID != "orders" {
		t.Errorf("offsets v%d name the source %q, want orders", c.Latest.Version, src.ID)
	}
	if len(c.Operators) != 1 || c.Operators[0].Name != "dedupe" {
		t.Fatalf("operators = %+v, want the dedup", c.Operators)
	}
	fams := c.Operators[0].Schemas["default"].Families
	if len(fams) == 0 {
		t.Fatalf("the dedup's state has no schema: %+v", c.Operators[0])
	}
	var key []string
	for _, f := range fams[0].Key.Fields {
		key = append(key, f.Name+" "+f.TypeName())
	}
	if want := []string{"id string", "qty bigint"}; !cmp.Equal(key, want) && !cmp.Equal(key, []string{"id string", "qty long"}) {
		t.Errorf("the dedup's state key = %v, want %v", key, want)
	}
	batches, err := sparkckpt.Batches(ctx, store)
	if err != nil || len(batches) == 0 || batches[len(batches)-1].Commit == nil {
		t.Errorf("Batches on S3 = %+v, %v; want the committed batches", batches, err)
	}
}

func minioListAll(prefix string) minio.ListObjectsOptions {
	return minio.ListObjectsOptions{Prefix: prefix, Recursive: true}
}

// TestS3OwnSettings: the checkpoint on versitygw (the query's S3 settings) and the files sink
// on MinIO with its own s3: settings and keys in LOCKSTEP_SINK_AWS_*: Spark reaches each
// bucket with its own endpoint and keys (S3A's per-bucket settings and the runner's
// EnvCredentials), and writes the rows the built-in engine writes.
func TestS3OwnSettings(t *testing.T) {
	runner := sparktest.Runner(t)
	ck, out := testenv.S3Of(t, "versitygw"), testenv.S3Of(t, "minio")
	if ck.Bucket == out.Bucket {
		t.Fatalf("both servers' buckets are %s: the test needs two", ck.Bucket)
	}
	for _, kv := range ck.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Setenv("LOCKSTEP_SINK_AWS_ACCESS_KEY_ID", out.AccessKey)
	t.Setenv("LOCKSTEP_SINK_AWS_SECRET_ACCESS_KEY", out.SecretKey)
	ctx := context.Background()
	in := filepath.Join(t.TempDir(), "in")
	writeInput(t, in)
	query := func(name string) *v1.StreamingQuery {
		return qt.Make("s3-own-"+name, "diff").FilesSource("orders", in, v1.FormatJSON, diffColumns...).
			Filter("amount > 1").SelectColumns("id", "qty", "ts").
			FilesSink("s3://"+out.Bucket+"/out-"+name, v1.FormatJSON).
			Edit(func(s *v1.StreamingQuerySpec) {
				s.Sink.Files.S3 = &v1.S3Connection{Endpoint: out.URL, Region: out.Region}
			}).
			AvailableNow().Checkpoint("s3://" + ck.Bucket + "/ck-" + name).Obj()
	}
	compareRuntimes(t, ctx, runner, "a files sink on MinIO with its own settings", query, out.Options()...)
}
