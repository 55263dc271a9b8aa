package spark_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/spark"
	"github.com/lockstep-dev/lockstep/engine/spark/sparktest"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// retainedQuery is obj on Spark at loc, its console output discarded.
func retainedQuery(t *testing.T, runner spark.Runner, obj *v1.StreamingQuery, loc string) *spark.Query {
	t.Helper()
	q, err := spark.New(obj, spark.Options{Runner: runner, Location: loc, LogPath: filepath.Join(filepath.Dir(loc), "spark.log"), Stdout: &bytes.Buffer{}})
	if err != nil {
		t.Fatalf("spark.New: %v", err)
	}
	return q
}

func retainedRun(t *testing.T, ctx context.Context, q *spark.Query) {
	t.Helper()
	if _, err := q.Run(ctx); err != nil {
		log, _ := os.ReadFile(q.LogPath())
		t.Fatalf("run on spark: %v\nSpark's log, last lines:\n%s", err, tail(string(log), 40))
	}
}

// wantSourceLost checks that err is an engine.ErrRebuildImpossible naming source and saying
// want.
func wantSourceLost(t *testing.T, what string, err error, source, want string) {
	t.Helper()
	var lost *engine.SourceLostError
	if !errors.As(err, &lost) || !errors.Is(err, engine.ErrRebuildImpossible) || lost.Source != source || !strings.Contains(err.Error(), want) {
		t.Fatalf("%s = %v; want a SourceLostError of source %s saying %q", what, err, source, want)
	}
}

// TestSparkRetainedFiles: a files source on Spark whose file of batch 0 was deleted after the
// batches ran makes PlanRebuild (and the rebuild, before it replays anything) fail with a
// SourceLostError naming the file; with the file back, the rebuild runs, and the check then
// reads the rebuilt generation's Spark files (generation-1/).
func TestSparkRetainedFiles(t *testing.T) {
	t.Parallel()
	runner := sparktest.Runner(t)
	ctx := context.Background()
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	orders := filepath.Join(in, "orders")
	writeFiles(t, orders, oracleInput[:2])
	loc := filepath.Join(dir, "ckpt")
	conf := func(s *v1.StreamingQuerySpec) {
		s.Runtime.Spark.Conf = map[string]string{"spark.sql.streaming.noDataMicroBatches.enabled": "false"}
	}
	retainedRun(t, ctx, retainedQuery(t, runner, oracleQuery(in).Edit(conf).Obj(), loc))

	nu := oracleQuery(in).Edit(conf).Edit(func(s *v1.StreamingQuerySpec) { s.Transform[1].Aggregate.GroupBy[0].Column = "city" }).Obj()
	q := retainedQuery(t, runner, nu, loc)
	began := time.Now()
	p, err := q.PlanRebuild(ctx)
	if err != nil || p.Batches != 2 {
		t.Fatalf("PlanRebuild with every file there = %+v, %v; want 2 batches, no error", p, err)
	}
	t.Logf("PlanRebuild asked the files source in %s", time.Since(began).Round(time.Millisecond))

	if err := os.Remove(filepath.Join(orders, "part-0.json")); err != nil {
		t.Fatal(err)
	}
	gone := "the file " + filepath.Join(orders, "part-0.json") + " that batch 0 read is gone"
	_, err = q.PlanRebuild(ctx)
	wantSourceLost(t, "PlanRebuild after part-0.json was deleted", err, "orders", gone)
	if !strings.Contains(err.Error(), "source orders no longer holds what batches 0–1 read") {
		t.Errorf("PlanRebuild = %v; want it to say which batches", err)
	}
	_, err = q.Rebuild(ctx, engine.RebuildOptions{})
	wantSourceLost(t, "Rebuild after part-0.json was deleted", err, "orders", gone)
	if _, err := os.Stat(filepath.Join(loc, "generation-1", "offsets")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused rebuild replayed into generation-1 (%v)", err)
	}

	// The happy path: the file back, the rebuild runs.
	writeFiles(t, orders, oracleInput[:2])
	sum, err := q.Rebuild(ctx, engine.RebuildOptions{})
	if err != nil || sum.Generation != 1 || sum.Replayed != 2 {
		log, _ := os.ReadFile(q.LogPath())
		t.Fatalf("Rebuild with the files back = %+v, %v; want generation 1 of 2 batches\n%s", sum, err, tail(string(log), 40))
	}
	// Generation 1's Spark files (its copy of the file source log) are what is checked now.
	if err := os.Remove(filepath.Join(orders, "part-1.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(loc, "sources")); err != nil { // generation 0's: not read
		t.Fatal(err)
	}
	_, err = retainedQuery(t, runner, nu, loc).PlanRebuild(ctx)
	wantSourceLost(t, "PlanRebuild of generation 1 after part-1.json was deleted", err, "orders",
		"the file "+filepath.Join(orders, "part-1.json")+" that batch 1 read is gone")
}

// TestSparkRetainedKafka: a Kafka source on Spark (the real broker) whose batch 0 read
// offsets 0–5 of a partition: while the partition holds them PlanRebuild offers the rebuild;
// once a DeleteRecords moved the partition's start to 3, it fails with a SourceLostError
// naming the topic, the partition and the offsets.
func TestSparkRetainedKafka(t *testing.T) {
	t.Parallel()
	runner := sparktest.Runner(t)
	ctx := context.Background()
	brokers := testenv.Kafka(t)
	topic := fmt.Sprintf("spark-retained-%d", time.Now().UnixNano())
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if created, err := adm.CreateTopics(ctx, 2, 1, nil, topic); err != nil || created.Error() != nil {
		t.Fatalf("create %s: %v %v", topic, err, created.Error())
	}
	var recs []*kgo.Record
	for i := range 6 {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0,
			Value: []byte(fmt.Sprintf(`{"id":"o%d","country":"c%d","ts":"2026-01-01T00:00:%02dZ"}`, i, i%2, i))})
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	query := func(keyed string) *v1.StreamingQuery {
		return qt.Make("retained-kafka", "spark").
			KafkaSource("orders", brokers[0], topic, v1.Column{Name: "id", Type: v1.TypeString}, v1.Column{Name: "country", Type: v1.TypeString}, v1.Column{Name: "ts", Type: v1.TypeTimestamp}).
			EditSource("orders", func(s *v1.Source) { s.Kafka.StartingOffsets = v1.OffsetsEarliest }).
			DropDuplicates("", keyed).
			OutputMode(v1.OutputAppend).ConsoleSink().AvailableNow().
			Edit(func(s *v1.StreamingQuerySpec) { s.Runtime.Spark = &v1.SparkRuntime{} }).Obj()
	}
	dir := t.TempDir()
	loc := filepath.Join(dir, "ckpt")
	retainedRun(t, ctx, retainedQuery(t, runner, query("id"), loc))
	if _, err := os.Stat(filepath.Join(loc, "commits", "0")); err != nil {
		t.Fatalf("Spark committed no batch: %v", err)
	}

	q := retainedQuery(t, runner, query("country"), loc)
	if _, err := q.PlanRebuild(ctx); err != nil {
		t.Fatalf("PlanRebuild with every record there = %v, want nil", err)
	}
	o := kadm.Offsets{}
	o.AddOffset(topic, 0, 3, -1)
	if resp, err := adm.DeleteRecords(ctx, o); err != nil || resp.Error() != nil {
		t.Fatalf("delete records: %v %v", err, resp.Error())
	}
	_, err = q.PlanRebuild(ctx)
	wantSourceLost(t, "PlanRebuild after DeleteRecords", err, "orders",
		fmt.Sprintf("Kafka partition %s-0 starts at offset 3 now; the committed batches read it from offset 0, so offsets 0–2 are gone", topic))
	_, err = q.Rebuild(ctx, engine.RebuildOptions{})
	wantSourceLost(t, "Rebuild after DeleteRecords", err, "orders", topic+"-0 starts at offset 3")
	records, err := checkpoint.Open(ctx, loc+"/"+spark.RecordsDir)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := checkpoint.CurrentGeneration(ctx, records); err != nil || g.Number != 0 {
		t.Errorf("current generation after the refused rebuild = %+v, %v; want 0", g, err)
	}
}

// TestSparkRetainedDelta: a Delta source on Spark (a table the built-in engine wrote, one
// commit a file) read one file a batch from the snapshot it started at: while the table holds
// every data file PlanRebuild offers the rebuild; once one the batches read is gone (as a
// VACUUM removes it), it fails with a SourceLostError naming the file.
func TestSparkRetainedDelta(t *testing.T) {
	t.Parallel()
	runner := sparktest.Runner(t)
	ctx := context.Background()
	dir := t.TempDir()
	_, table := writeDeltaInput(t, ctx, dir)
	query := func(keyed string) *v1.StreamingQuery {
		return qt.Make("retained-delta", "spark").DeltaSource("orders", table, diffColumns...).
			EditSource("orders", func(s *v1.Source) { s.Delta.MaxFilesPerTrigger = ptr[int32](1) }).
			DropDuplicates("", keyed).OutputMode(v1.OutputAppend).ConsoleSink().AvailableNow().
			Edit(func(s *v1.StreamingQuerySpec) { s.Runtime.Spark = &v1.SparkRuntime{} }).Obj()
	}
	loc := filepath.Join(dir, "ckpt")
	retainedRun(t, ctx, retainedQuery(t, runner, query("id"), loc))
	q := retainedQuery(t, runner, query("qty"), loc)
	if _, err := q.PlanRebuild(ctx); err != nil {
		t.Fatalf("PlanRebuild with every data file there = %v, want nil", err)
	}
	files, err := filepath.Glob(filepath.Join(table, "*.parquet"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no data file in %s (%v)", table, err)
	}
	if err := os.Remove(files[0]); err != nil {
		t.Fatal(err)
	}
	_, err = q.PlanRebuild(ctx)
	wantSourceLost(t, "PlanRebuild after a data file was removed", err, "orders",
		"the data file "+files[0]+" that the committed batches read is gone")
}

// TestSparkRetainedDeltaUnknown: a Delta source whose batch 0 read the whole starting snapshot
// and moved on: Spark's offsets do not say which version that snapshot was of, so the
// retention is unknown (engine.ErrRetentionUnknown, with the reason), never a guess. The
// offsets entry is one as Spark 4.2 writes it.
func TestSparkRetainedDeltaUnknown(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	loc := filepath.Join(dir, "ckpt")
	entry := "v1\n" + `{"batchWatermarkMs":0,"batchTimestampMs":1796598123826,"conf":{"spark.sql.streaming.queryEvolution.enableSourceEvolution":"true"}}` + "\n" +
		`{"sourceVersion":1,"reservoirId":"5b0d0c2e-9c1d-4c1a-8a51-1f0e4b1e2a11","reservoirVersion":3,"index":-1,"isStartingVersion":false}` + "\n"
	if err := os.MkdirAll(filepath.Join(loc, "offsets"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(loc, "offsets", "0"), []byte(entry), 0o644); err != nil {
		t.Fatal(err)
	}
	obj := qt.Make("retained-delta", "spark").DeltaSource("orders", filepath.Join(dir, "table"), v1.Column{Name: "id", Type: v1.TypeString}).
		ConsoleSink().AvailableNow().Edit(func(s *v1.StreamingQuerySpec) { s.Runtime.Spark = &v1.SparkRuntime{} }).Obj()
	q, err := spark.New(obj, spark.Options{Location: loc})
	if err != nil {
		t.Fatal(err)
	}
	store, err := checkpoint.Open(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	err = q.CheckRetained(ctx, store, 1)
	if !errors.Is(err, engine.ErrRetentionUnknown) || errors.Is(err, engine.ErrRebuildImpossible) || !strings.Contains(err.Error(), "source orders") ||
		!strings.Contains(err.Error(), "Spark's Delta offsets do not record the version") {
		t.Errorf("CheckRetained of a Delta source = %v; want ErrRetentionUnknown naming the source and saying why", err)
	}
}
