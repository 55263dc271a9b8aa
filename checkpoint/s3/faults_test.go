package s3_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/checkpoint/storetest"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

func TestOpenRefusesAServerThatIgnoresConditionalWrites(t *testing.T) {
	srv := testenv.S3(t)
	p := newProxy(t, srv)
	p.inject(testenv.Rule{Kind: testenv.Custom, Handler: ignoreConditions(t, srv),
		Match: testenv.Match{Method: http.MethodPut, IfNoneMatch: true}, Times: testenv.Always})
	_, err := s3.Open(t.Context(), srv.Bucket, "q", serverOptions(p.server())...)
	if !errors.Is(err, s3.ErrConditionalWritesIgnored) {
		t.Fatalf("Open behind a proxy that drops If-None-Match error = %v, want ErrConditionalWritesIgnored", err)
	}
	if !strings.Contains(err.Error(), "could be corrupted") {
		t.Errorf("error %q does not say what is at stake", err)
	}
	for obj := range srv.Client(t).ListObjectsIter(t.Context(), srv.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		t.Errorf("Open left %s behind (err %v)", obj.Key, obj.Err)
	}
	// Through the same proxy without the fault, Open works: the refusal
	// was about the conditional writes, not the proxy.
	p.reset()
	if _, err := s3.Open(t.Context(), srv.Bucket, "q", serverOptions(p.server())...); err != nil {
		t.Errorf("Open through a faithful proxy error = %v", err)
	}
}

func TestTransientFailuresAreRetried(t *testing.T) {
	_, p, s := behindProxy(t, s3.WithRetries(5, time.Millisecond))
	for _, tc := range []struct {
		name string
		rule testenv.Rule
	}{
		{"SlowDown", testenv.Rule{Kind: testenv.SlowDown}},
		{"InternalError", testenv.Rule{Kind: testenv.InternalError}},
		{"ServiceUnavailable", testenv.Rule{Kind: testenv.Unavailable}},
		{"TooManyRequests", testenv.Rule{Kind: testenv.Custom, Handler: answer(http.StatusTooManyRequests, "TooManyRequests")}},
		{"LostReply", testenv.Rule{Kind: testenv.LostReply, Match: testenv.Match{Method: http.MethodGet}}},
		{"Reset", testenv.Rule{Kind: testenv.Reset}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.rule.Times = 2
			p.inject(tc.rule)
			var retried int
			if err := s.Create(s3.CountRetries(t.Context(), &retried), "offsets/"+tc.name, []byte("x")); err != nil {
				t.Fatalf("Create after two %s answers error = %v", tc.name, err)
			}
			want := []string{"PUT If-None-Match", "PUT If-None-Match", "PUT If-None-Match"}
			if tc.rule.Kind == testenv.LostReply { // aimed at GETs only
				want = want[:1]
			}
			if got := p.requests(); !slices.Equal(got, want) {
				t.Errorf("requests = %q, want %q", got, want)
			}
			if retried != len(want)-1 {
				t.Errorf("CountRetries counted %d retries of the Create, want %d", retried, len(want)-1)
			}
			p.inject(tc.rule)
			if got, err := s.Get(t.Context(), "offsets/"+tc.name); err != nil || string(got) != "x" {
				t.Errorf("Get after two %s answers = %q, %v", tc.name, got, err)
			}
			// net/http itself sends a GET again once on a kept-alive
			// connection that dies without an answer, so a lost or
			// reset GET may reach the proxy more often than Get tried.
			if got := p.requests(); len(got) < 3 || slices.ContainsFunc(got, func(r string) bool { return r != "GET" }) {
				t.Errorf("requests = %q, want at least three GETs", got)
			}
		})
	}
}

func TestPermanentFailuresAreNotRetried(t *testing.T) {
	_, p, s := behindProxy(t, s3.WithRetries(5, 50*time.Millisecond))
	if err := s.Create(t.Context(), "k", []byte("first")); err != nil {
		t.Fatal(err)
	}

	p.reset()
	if err := s.Create(t.Context(), "k", []byte("second")); !errors.Is(err, checkpoint.ErrExists) {
		t.Errorf("Create of an existing key error = %v, want ErrExists", err)
	}
	if got := p.requests(); len(got) != 1 {
		t.Errorf("a failed precondition (412) sent %q, want one request", got)
	}

	p.reset()
	if _, err := s.Get(t.Context(), "missing"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("Get of a missing key error = %v, want ErrNotFound", err)
	}
	if got := p.requests(); len(got) != 1 {
		t.Errorf("a missing object (404) sent %q, want one request", got)
	}

	p.inject(testenv.Rule{Kind: testenv.Custom, Handler: answer(http.StatusForbidden, "AccessDenied"), Times: testenv.Always})
	if err := s.Put(t.Context(), "k", []byte("x")); !errors.Is(err, s3.ErrAccessDenied) {
		t.Errorf("Put answered 403 error = %v, want ErrAccessDenied", err)
	}
	if got := p.requests(); len(got) != 1 {
		t.Errorf("a refused permission (403) sent %q, want one request", got)
	}
}

func TestRetriesEnd(t *testing.T) {
	_, p, s := behindProxy(t, s3.WithRetries(3, time.Millisecond))
	patient := open(t, p.server(), "q", s3.WithRetries(1000, 5*time.Millisecond))
	slow := open(t, p.server(), "q", s3.WithRetries(1000, time.Hour))
	p.inject(testenv.Rule{Kind: testenv.SlowDown, Times: testenv.Always})
	err := s.Put(t.Context(), "k", []byte("x"))
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Errorf("Put against a server that always answers 503 error = %v, want the server's error", err)
	}
	if n := len(p.requests()); n != 3 {
		t.Errorf("sent %d requests, want 3 attempts", n)
	}
	// The caller's context ends the retries early.
	start := time.Now()
	if err := patient.Put(ctxWithTimeout(t, 50*time.Millisecond), "k", []byte("x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Put with an expiring context error = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Put with a 50ms context took %v", d)
	}
	// A wait that would pass the caller's deadline ends the retries as
	// that deadline would, not as the operation timeout.
	if err := slow.Put(ctxWithTimeout(t, 50*time.Millisecond), "k", []byte("x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Put whose next wait passes the caller's deadline error = %v, want context.DeadlineExceeded", err)
	}
}

// An outage shorter than the retries is ridden out.
func TestOutageIsRiddenOut(t *testing.T) {
	for _, mode := range []testenv.OutageMode{testenv.OutageRefuse, testenv.OutageReset, testenv.OutageUnavailable} {
		t.Run(mode.String(), func(t *testing.T) {
			_, p, s := behindProxy(t, s3.WithRetries(1000, time.Millisecond))
			p.Outage(200*time.Millisecond, mode)
			if err := s.Create(t.Context(), "k", []byte("x")); err != nil {
				t.Fatalf("Create through a %v outage of 200ms error = %v", mode, err)
			}
			if got, err := s.Get(t.Context(), "k"); err != nil || string(got) != "x" {
				t.Errorf("Get after the outage = %q, %v", got, err)
			}
		})
	}
}

func TestSlowAttemptsTimeOutAndAreRetried(t *testing.T) {
	_, p, s := behindProxy(t, s3.WithRetries(3, time.Millisecond), s3.WithRequestTimeout(200*time.Millisecond))
	p.inject(testenv.Rule{Kind: testenv.Delay, Delay: 5 * time.Second})
	start := time.Now()
	if err := s.Create(t.Context(), "k", []byte("x")); err != nil {
		t.Fatalf("Create with a hanging first attempt error = %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Create took %v, want the first attempt cut at 200ms", d)
	}
}

// When the answer to a successful conditional PUT is lost, the retry meets
// its own object (412). Create recognizes it by its content.
func TestCreateWhoseAnswerWasLost(t *testing.T) {
	srv, p, s := behindProxy(t, s3.WithRetries(3, time.Millisecond))
	for _, tc := range []struct {
		name string
		rule testenv.Rule
	}{
		{"connection closed", testenv.Rule{Kind: testenv.LostReply}},
		{"answered 500", testenv.Rule{Kind: testenv.Custom, Handler: func(w http.ResponseWriter, r *http.Request, forward http.Handler) {
			forward.ServeHTTP(discard{}, r) // the write happens, the answer is lost
			testenv.WriteS3Error(w, r, http.StatusInternalServerError, "InternalError", "injected by the test proxy")
		}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p.inject(tc.rule)
			key := "offsets/" + strings.ReplaceAll(tc.name, " ", "-")
			if err := s.Create(t.Context(), key, []byte("mine")); err != nil {
				t.Fatalf("Create whose first answer was lost error = %v, want success", err)
			}
			if got := p.requests(); !slices.Equal(got, []string{"PUT If-None-Match", "PUT If-None-Match", "GET"}) {
				t.Errorf("requests = %q, want PUT, retried PUT (412), GET", got)
			}
		})
	}

	// Had another writer won in between, Create loses.
	p.inject(testenv.Rule{Kind: testenv.Custom, Handler: func(w http.ResponseWriter, r *http.Request, _ http.Handler) {
		key := strings.TrimPrefix(r.URL.Path, "/"+srv.Bucket+"/")
		if _, err := srv.Client(t).PutObject(r.Context(), srv.Bucket, key, bytes.NewReader([]byte("theirs")), 6, minio.PutObjectOptions{}); err != nil {
			t.Error(err)
		}
		testenv.WriteS3Error(w, r, http.StatusInternalServerError, "InternalError", "injected by the test proxy")
	}})
	if err := s.Create(t.Context(), "offsets/00000000000000000002", []byte("mine")); !errors.Is(err, checkpoint.ErrExists) {
		t.Errorf("Create that lost to another writer during a retry error = %v, want ErrExists", err)
	}
}

// discard takes an answer nobody reads.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

// TestStoreUnderFaults runs the conformance suite through the fault proxy,
// one fault kind at a time at 20% of the requests, on every server kind:
// the store's promises (atomic create-if-absent, exactly one winner of a
// race, listings) hold when S3 loses replies, throttles, fails and resets.
func TestStoreUnderFaults(t *testing.T) {
	for _, kind := range testenv.S3Kinds() {
		for _, fault := range []testenv.Kind{testenv.LostReply, testenv.SlowDown, testenv.InternalError, testenv.Reset} {
			t.Run(kind+"/"+string(fault), func(t *testing.T) {
				storetest.Run(t, func(t *testing.T) checkpoint.Store {
					proxy := testenv.NewS3Proxy(t, testenv.S3Of(t, kind), 13)
					s := open(t, proxy.Server(), "faults", s3.WithRetries(0, time.Millisecond))
					proxy.Random(0.2, fault)
					t.Cleanup(func() { t.Logf("%d requests, %v", proxy.Requests(), proxy.Counts()) })
					return s
				})
			})
		}
	}
}
