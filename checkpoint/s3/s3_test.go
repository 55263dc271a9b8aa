package s3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/checkpoint/storetest"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// serverOptions point a Store at srv explicitly, ignoring the environment.
func serverOptions(srv *testenv.S3Server) []s3.Option {
	return []s3.Option{
		s3.WithEndpoint(srv.URL),
		s3.WithRegion(srv.Region),
		s3.WithCredentials(srv.AccessKey, srv.SecretKey, ""),
	}
}

func open(t testing.TB, srv *testenv.S3Server, prefix string, opts ...s3.Option) *s3.Store {
	t.Helper()
	s, err := s3.Open(t.Context(), srv.Bucket, prefix, append(serverOptions(srv), opts...)...)
	if err != nil {
		t.Fatalf("Open(%s, %q) error = %v", srv.Bucket, prefix, err)
	}
	return s
}

// TestStore runs the conformance suite on every S3 server kind: versitygw
// and MinIO (LOCKSTEP_TEST_S3 narrows the list).
func TestStore(t *testing.T) {
	for _, kind := range testenv.S3Kinds() {
		t.Run(kind, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) checkpoint.Store {
				return open(t, testenv.S3Of(t, kind), "payments/revenue-by-country")
			})
		})
	}
}

func TestStoreAtBucketRoot(t *testing.T) {
	storetest.Run(t, func(t *testing.T) checkpoint.Store {
		return open(t, testenv.S3(t), "")
	})
}

// Two stores on neighbouring prefixes do not see each other's objects,
// although one prefix is a string prefix of the other.
func TestPrefixesAreIsolated(t *testing.T) {
	srv := testenv.S3(t)
	a, b := open(t, srv, "q"), open(t, srv, "q2")
	if err := a.Create(t.Context(), "metadata", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := b.Create(t.Context(), "metadata", []byte("b")); err != nil {
		t.Fatalf("Create in a neighbouring prefix error = %v", err)
	}
	keys, err := checkpoint.ListKeys(t.Context(), a, "")
	if err != nil || len(keys) != 1 {
		t.Errorf("List of prefix q = %q, %v; want only its own metadata", keys, err)
	}
	if a.Location() != "s3://"+srv.Bucket+"/q" {
		t.Errorf("Location() = %q, want s3://%s/q", a.Location(), srv.Bucket)
	}
}

func TestOpenLeavesNoScratchObject(t *testing.T) {
	srv := testenv.S3(t)
	open(t, srv, "q")
	var names []string
	for obj := range srv.Client(t).ListObjectsIter(t.Context(), srv.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		names = append(names, obj.Key)
	}
	if len(names) != 0 {
		t.Errorf("objects after Open: %q, want none", names)
	}
}

func TestOpenMissingBucket(t *testing.T) {
	srv := testenv.S3(t)
	missing := *srv
	missing.Bucket = "no-such-bucket-here"
	_, err := s3.Open(t.Context(), missing.Bucket, "q", serverOptions(&missing)...)
	if !errors.Is(err, s3.ErrNoSuchBucket) {
		t.Fatalf("Open of a missing bucket error = %v, want ErrNoSuchBucket", err)
	}
	if !strings.Contains(err.Error(), "bucket no-such-bucket-here does not exist") {
		t.Errorf("error %q does not say which bucket is missing", err)
	}
}

func TestOpenWrongCredentials(t *testing.T) {
	srv := testenv.S3(t)
	for name, creds := range map[string][2]string{
		"wrong secret":       {srv.AccessKey, "not-the-secret"},
		"unknown access key": {"nobody", srv.SecretKey},
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			_, err := s3.Open(t.Context(), srv.Bucket, "q",
				s3.WithEndpoint(srv.URL), s3.WithRegion(srv.Region), s3.WithCredentials(creds[0], creds[1], ""))
			if !errors.Is(err, s3.ErrCredentials) {
				t.Fatalf("Open error = %v, want ErrCredentials", err)
			}
			if !strings.Contains(err.Error(), "rejected the credentials") || !strings.Contains(err.Error(), creds[0]) {
				t.Errorf("error %q does not say the credentials (of %s) were rejected", err, creds[0])
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("Open took %v: a rejection must not be retried", d)
			}
		})
	}
}

func TestOpenBadEndpoint(t *testing.T) {
	for _, ep := range []string{"127.0.0.1:9000", "ftp://127.0.0.1:9000", "http://", "http://host:9000/path", "http://u:p@host:9000"} {
		_, err := s3.Open(t.Context(), "bucket", "q", s3.WithEndpoint(ep), s3.WithCredentials("a", "b", ""))
		if err == nil || !strings.Contains(err.Error(), "want http://host:port or https://host:port") {
			t.Errorf("Open with endpoint %q error = %v, want it refused", ep, err)
		}
	}
}

func TestOpenUnreachableServer(t *testing.T) {
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = s3.Open(t.Context(), "bucket", "q", s3.WithEndpoint(fmt.Sprintf("http://127.0.0.1:%d", port)),
		s3.WithCredentials("a", "b", ""), s3.WithRetries(3, 10*time.Millisecond))
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Open of a closed port error = %v, want connection refused", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Open took %v with 3 attempts", d)
	}
}

func TestEnvironmentFallbacks(t *testing.T) {
	srv := testenv.S3(t)
	srv.Setenv(t)
	s, err := checkpoint.Open(t.Context(), "s3://"+srv.Bucket+"/from/env", checkpoint.WithS3(s3.Opener()))
	if err != nil {
		t.Fatalf("Open from the environment error = %v", err)
	}
	if err := s.Create(t.Context(), "metadata", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if s.Location() != "s3://"+srv.Bucket+"/from/env" {
		t.Errorf("Location() = %q", s.Location())
	}
	t.Setenv(s3.EnvSecretKey, "wrong")
	if _, err := checkpoint.Open(t.Context(), "s3://"+srv.Bucket+"/from/env", checkpoint.WithS3(s3.Opener())); !errors.Is(err, s3.ErrCredentials) {
		t.Errorf("Open with a wrong secret in the environment error = %v, want ErrCredentials", err)
	}
	// Explicit options win over the environment.
	if _, err := checkpoint.Open(t.Context(), "s3://"+srv.Bucket+"/from/env", checkpoint.WithS3(s3.Opener(serverOptions(srv)...))); err != nil {
		t.Errorf("Open with explicit options error = %v", err)
	}
	t.Setenv(s3.EnvEndpoint, "not-a-url")
	if _, err := checkpoint.Open(t.Context(), "s3://"+srv.Bucket+"/x", checkpoint.WithS3(s3.Opener())); err == nil || !strings.Contains(err.Error(), s3.EnvEndpoint) {
		t.Errorf("Open with a malformed %s error = %v, want it named", s3.EnvEndpoint, err)
	}
}

func TestReadOnly(t *testing.T) {
	srv := testenv.S3(t)
	w := open(t, srv, "q")
	if err := w.Create(t.Context(), "metadata", []byte("m")); err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, srv)
	r := open(t, p.server(), "q", s3.ReadOnly())
	if n := p.count("PUT"); n != 0 {
		t.Errorf("a read-only Open sent %d PUTs, want none", n)
	}
	if got, err := r.Get(t.Context(), "metadata"); err != nil || string(got) != "m" {
		t.Errorf("read-only Get = %q, %v", got, err)
	}
	for name, err := range map[string]error{
		"Create": r.Create(t.Context(), "k", nil),
		"Put":    r.Put(t.Context(), "k", nil),
		"Delete": r.Delete(t.Context(), "metadata"),
	} {
		if !errors.Is(err, checkpoint.ErrReadOnly) {
			t.Errorf("read-only %s error = %v, want ErrReadOnly", name, err)
		}
	}
}

// A checkpoint on S3, end to end: two writers fenced, restart, retention,
// description.
func TestCheckpointOnS3(t *testing.T) {
	srv := testenv.S3(t)
	ctx := t.Context()
	store, err := checkpoint.Open(ctx, "s3://"+srv.Bucket+"/payments/revenue", checkpoint.WithS3(s3.Opener(serverOptions(srv)...)))
	if err != nil {
		t.Fatal(err)
	}
	owner := checkpoint.Owner{Namespace: "payments", Name: "revenue"}
	a, err := checkpoint.Claim(ctx, store, owner)
	if err != nil {
		t.Fatal(err)
	}
	b, err := checkpoint.Claim(ctx, store, owner)
	if err != nil {
		t.Fatal(err)
	}
	if a.Metadata().ID != b.Metadata().ID {
		t.Fatalf("two claims of one location got query ids %s and %s", a.Metadata().ID, b.Metadata().ID)
	}
	for batch := range int64(6) {
		o := checkpoint.Offsets{BatchID: batch, Sources: []checkpoint.SourceOffset{{Source: "orders", Offset: []byte(fmt.Sprint(batch))}}}
		if err := a.AddOffsets(ctx, o); err != nil {
			t.Fatal(err)
		}
		if err := b.AddOffsets(ctx, o); !errors.Is(err, checkpoint.ErrFenced) {
			t.Fatalf("second writer's AddOffsets(%d) error = %v, want ErrFenced", batch, err)
		}
		if batch < 5 {
			if err := a.AddCommit(ctx, checkpoint.Commit{BatchID: batch}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := checkpoint.Claim(ctx, store, checkpoint.Owner{Name: "intruder"}); !errors.Is(err, checkpoint.ErrOwnerMismatch) {
		t.Errorf("Claim by another owner error = %v, want ErrOwnerMismatch", err)
	}
	if oldest, err := a.Purge(ctx, 2); err != nil || oldest != 3 {
		t.Fatalf("Purge(2) = %d, %v; want 3", oldest, err)
	}
	d, err := checkpoint.Describe(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if *d.PlannedBatch != 5 || *d.CommittedBatch != 4 || !d.Replay || d.NextBatch != 5 || *d.OldestBatch != 3 || d.RetainedBatches != 3 {
		t.Errorf("Describe = planned %d committed %d replay %v next %d oldest %d retained %d; want 5 4 true 5 3 3",
			*d.PlannedBatch, *d.CommittedBatch, d.Replay, d.NextBatch, *d.OldestBatch, d.RetainedBatches)
	}
	// A hand-damaged offsets entry on S3 is reported by name.
	if err := store.Put(ctx, checkpoint.OffsetsKey(5), []byte("v1\n{oops\n")); err != nil {
		t.Fatal(err)
	}
	_, err = a.Head(ctx)
	if !errors.Is(err, checkpoint.ErrDamaged) || !strings.Contains(err.Error(), "s3://"+srv.Bucket+"/payments/revenue/offsets/00000000000000000005") {
		t.Errorf("Head with a damaged offsets entry error = %v, want ErrDamaged naming the object", err)
	}
}

func TestLargeObjectIsOnePut(t *testing.T) {
	srv := testenv.S3(t)
	p := newProxy(t, srv)
	s := open(t, p.server(), "q")
	p.reset()
	data := bytes.Repeat([]byte("x"), storetest.LargeSize)
	if err := s.Create(t.Context(), "big", data); err != nil {
		t.Fatal(err)
	}
	if got := p.requests(); len(got) != 1 || got[0] != "PUT If-None-Match" {
		t.Errorf("Create of %d bytes sent %q, want one conditional PUT (no multipart upload)", len(data), got)
	}
}

func ctxWithTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestConcurrentClaimsOnS3AgreeOnTheQueryID(t *testing.T) {
	srv := testenv.S3(t)
	storetest.ConcurrentClaims(t, open(t, srv, "q"), checkpoint.Owner{Name: "q"})
}
