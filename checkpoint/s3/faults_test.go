package s3_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

func TestOpenRefusesAServerThatIgnoresConditionalWrites(t *testing.T) {
	srv := testenv.S3(t)
	p := newProxy(t, srv)
	p.setIntercept(p.ignoreConditions)
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
	srv := testenv.S3(t)
	p := newProxy(t, srv)
	s := open(t, p.server(), "q", s3.WithRetries(5, time.Millisecond))
	for _, status := range []struct {
		code int
		s3   string
	}{{503, "SlowDown"}, {500, "InternalError"}, {429, "TooManyRequests"}} {
		t.Run(status.s3, func(t *testing.T) {
			p.setIntercept(func(w http.ResponseWriter, r *http.Request, n int) bool {
				if n < 2 {
					s3Error(w, status.code, status.s3)
					return true
				}
				return false
			})
			if err := s.Create(t.Context(), "offsets/"+status.s3, []byte("x")); err != nil {
				t.Fatalf("Create after two %d answers error = %v", status.code, err)
			}
			if got := p.requests(); !slices.Equal(got, []string{"PUT If-None-Match", "PUT If-None-Match", "PUT If-None-Match"}) {
				t.Errorf("requests = %q, want three conditional PUTs", got)
			}
			p.setIntercept(func(w http.ResponseWriter, r *http.Request, n int) bool {
				if n < 2 {
					s3Error(w, status.code, status.s3)
					return true
				}
				return false
			})
			if got, err := s.Get(t.Context(), "offsets/"+status.s3); err != nil || string(got) != "x" {
				t.Errorf("Get after two %d answers = %q, %v", status.code, got, err)
			}
		})
	}
}

func TestPermanentFailuresAreNotRetried(t *testing.T) {
	srv := testenv.S3(t)
	p := newProxy(t, srv)
	s := open(t, p.server(), "q", s3.WithRetries(5, 50*time.Millisecond))
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

	p.setIntercept(func(w http.ResponseWriter, r *http.Request, n int) bool {
		s3Error(w, http.StatusForbidden, "AccessDenied")
		return true
	})
	if err := s.Put(t.Context(), "k", []byte("x")); !errors.Is(err, s3.ErrAccessDenied) {
		t.Errorf("Put answered 403 error = %v, want ErrAccessDenied", err)
	}
	if got := p.requests(); len(got) != 1 {
		t.Errorf("a refused permission (403) sent %q, want one request", got)
	}
}

func TestRetriesEnd(t *testing.T) {
	srv := testenv.S3(t)
	p := newProxy(t, srv)
	s := open(t, p.server(), "q", s3.WithRetries(3, time.Millisecond))
	patient := open(t, p.server(), "q", s3.WithRetries(1000, 5*time.Millisecond))
	p.setIntercept(func(w http.ResponseWriter, r *http.Request, n int) bool {
		s3Error(w, http.StatusServiceUnavailable, "SlowDown")
		return true
	})
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
}

func TestSlowAttemptsTimeOutAndAreRetried(t *testing.T) {
	srv := testenv.S3(t)
	p := newProxy(t, srv)
	s := open(t, p.server(), "q", s3.WithRetries(3, time.Millisecond), s3.WithRequestTimeout(200*time.Millisecond))
	p.setIntercept(func(w http.ResponseWriter, r *http.Request, n int) bool {
		if n == 0 {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return true
		}
		return false
	})
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
	srv := testenv.S3(t)
	p := newProxy(t, srv)
	s := open(t, p.server(), "q", s3.WithRetries(3, time.Millisecond))
	loseFirstAnswer := func(w http.ResponseWriter, r *http.Request, n int) bool {
		if n != 0 {
			return false
		}
		p.forward.ServeHTTP(httptest.NewRecorder(), r) // the write happens, the answer is lost
		s3Error(w, http.StatusInternalServerError, "InternalError")
		return true
	}
	p.setIntercept(loseFirstAnswer)
	if err := s.Create(t.Context(), "offsets/00000000000000000001", []byte("mine")); err != nil {
		t.Fatalf("Create whose first answer was lost error = %v, want success", err)
	}
	if got := p.requests(); !slices.Equal(got, []string{"PUT If-None-Match", "PUT If-None-Match", "GET"}) {
		t.Errorf("requests = %q, want PUT, retried PUT (412), GET", got)
	}

	// Had another writer won in between, Create loses.
	p.setIntercept(func(w http.ResponseWriter, r *http.Request, n int) bool {
		if n != 0 {
			return false
		}
		key := strings.TrimPrefix(r.URL.Path, "/"+srv.Bucket+"/")
		if _, err := srv.Client(t).PutObject(r.Context(), srv.Bucket, key, bytes.NewReader([]byte("theirs")), 6, minio.PutObjectOptions{}); err != nil {
			t.Error(err)
		}
		s3Error(w, http.StatusInternalServerError, "InternalError")
		return true
	})
	if err := s.Create(t.Context(), "offsets/00000000000000000002", []byte("mine")); !errors.Is(err, checkpoint.ErrExists) {
		t.Errorf("Create that lost to another writer during a retry error = %v, want ErrExists", err)
	}
}
