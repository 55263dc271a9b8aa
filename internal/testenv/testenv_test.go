package testenv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestS3CreateIfAbsent proves the S3 servers honour If-None-Match: of 8
// concurrent conditional puts of one key, exactly one wins, in every round.
func TestS3CreateIfAbsent(t *testing.T) {
	for _, kind := range testenv.S3Kinds() {
		t.Run(kind, func(t *testing.T) {
			s := testenv.S3Of(t, kind)
			c := s.Client(t)
			ctx := context.Background()
			const writers, rounds = 8, 20
			for round := range rounds {
				key := fmt.Sprintf("race/%02d", round)
				var wg sync.WaitGroup
				errs := make([]error, writers)
				for w := range writers {
					wg.Go(func() {
						body := []byte(fmt.Sprintf("writer %d", w))
						opts := minio.PutObjectOptions{DisableMultipart: true}
						opts.SetMatchETagExcept("*")
						_, errs[w] = c.PutObject(ctx, s.Bucket, key, bytes.NewReader(body), int64(len(body)), opts)
					})
				}
				wg.Wait()
				wins := 0
				for _, err := range errs {
					switch {
					case err == nil:
						wins++
					case minio.ToErrorResponse(err).StatusCode != 412:
						t.Fatalf("round %d: put: %v, want success or 412 Precondition Failed", round, err)
					}
				}
				if wins != 1 {
					t.Fatalf("round %d: %d writers won, want exactly 1", round, wins)
				}
			}
		})
	}
}

func TestKafkaTransactionVisibleAfterCommit(t *testing.T) {
	brokers := testenv.Kafka(t)
	ctx := context.Background()
	const topic = "smoke"

	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID("smoke-txn"),
		kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	consumer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()

	if err := producer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := producer.ProduceSync(ctx, kgo.StringRecord("in-txn")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if got := poll(t, consumer, 500*time.Millisecond); len(got) != 0 {
		t.Fatalf("read_committed consumer saw %q before the commit", got)
	}
	if err := producer.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := poll(t, consumer, 10*time.Second); len(got) != 1 || got[0] != "in-txn" {
		t.Fatalf("after commit consumer saw %q, want [in-txn]", got)
	}
}

// TestKafkaProcessRestart kills the broker process and restarts it: records
// produced before the crash are still there.
func TestKafkaProcessRestart(t *testing.T) {
	b := testenv.KafkaProcess(t)
	ctx := context.Background()
	adm, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(adm).CreateTopic(ctx, 1, 1, nil, "durable"); err != nil {
		t.Fatal(err)
	}
	adm.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic("durable"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("before-crash")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	b.Kill()
	b.Start()
	consumer, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumeTopics("durable"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	if got := poll(t, consumer, 10*time.Second); len(got) != 1 || got[0] != "before-crash" {
		t.Fatalf("after restart consumer saw %q, want [before-crash]", got)
	}
}

// poll collects record values until one arrives and then a short quiet spell, or wait passes.
func poll(t *testing.T, c *kgo.Client, wait time.Duration) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var got []string
	for {
		fs := c.PollFetches(ctx)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return got
		}
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) && !errors.Is(e.Err, context.Canceled) {
				t.Fatalf("fetch %s/%d: %v", e.Topic, e.Partition, e.Err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		if len(got) > 0 {
			return got
		}
	}
}

func TestControlPlaneConfigMap(t *testing.T) {
	cfg := testenv.ControlPlane(t)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "smoke", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["k"] != "v" {
		t.Fatalf("ConfigMap data = %v, want k=v", got.Data)
	}
}

func TestPostgresRoundTrip(t *testing.T) {
	dsn := testenv.Postgres(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE t (id int primary key, name text)"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO t VALUES (1, 'lockstep')"); err != nil {
		t.Fatal(err)
	}
	var name string
	if err := conn.QueryRow(ctx, "SELECT name FROM t WHERE id = 1").Scan(&name); err != nil {
		t.Fatal(err)
	}
	if name != "lockstep" {
		t.Fatalf("name = %q, want lockstep", name)
	}
}

// An own server stops (fast or as a crash) and starts again on the same
// port, keeping what was committed; a session open across the stop breaks.
func TestOwnPostgresRestarts(t *testing.T) {
	srv := testenv.OwnPostgres(t)
	dsn := srv.Database(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, "CREATE TABLE t (id int primary key)"); err != nil {
		t.Fatal(err)
	}
	for i, mode := range []testenv.PostgresStop{testenv.PostgresFast, testenv.PostgresImmediate} {
		if _, err := conn.Exec(ctx, "INSERT INTO t VALUES ($1)", i); err != nil {
			t.Fatal(err)
		}
		srv.Stop(mode)
		if _, err := pgx.Connect(ctx, dsn); err == nil {
			t.Fatalf("stop %d: a connection succeeded while the server was stopped", mode)
		}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "SELECT 1"); err == nil {
			t.Errorf("stop %d: the session open across the stop still works", mode)
		}
		if conn, err = pgx.Connect(ctx, dsn); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != i+1 {
			t.Fatalf("stop %d: %d rows (%v), want %d", mode, n, err, i+1)
		}
	}
}

func TestTerraformVersion(t *testing.T) {
	out, err := exec.Command(testenv.Terraform(t), "version").Output()
	if err != nil {
		t.Fatalf("terraform version: %v", err)
	}
	if !strings.HasPrefix(string(out), "Terraform v") {
		t.Fatalf("terraform version printed %q", out)
	}
}

// TestMissingToolFails shows the message a test gets when a tool is not built.
func TestMissingToolFails(t *testing.T) {
	t.Setenv("LOCKSTEP_TOOLS", t.TempDir())
	var missing *testenv.MissingToolError
	_, err := testenv.LookupTool("versitygw")
	if !errors.As(err, &missing) || !strings.Contains(missing.Error(), "make tools") {
		t.Fatalf("LookupTool(versitygw) in an empty cache = %v, want a MissingToolError naming `make tools`", missing)
	}
}
