package testenv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// oneTry returns a minio-go client for s that makes each request once, so a
// test sees the fault itself rather than minio-go's retry of it.
func oneTry(t *testing.T, s *testenv.S3Server) *minio.Client {
	t.Helper()
	c, err := minio.New(s.Endpoint, &minio.Options{
		Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), Region: s.Region, MaxRetries: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func putIfAbsent(ctx context.Context, c *minio.Client, bucket, key string, body []byte) error {
	opts := minio.PutObjectOptions{DisableMultipart: true}
	opts.SetMatchETagExcept("*")
	_, err := c.PutObject(ctx, bucket, key, bytes.NewReader(body), int64(len(body)), opts)
	return err
}

func get(ctx context.Context, c *minio.Client, bucket, key string) ([]byte, error) {
	obj, err := c.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	return io.ReadAll(obj)
}

// forEachS3 runs test on every S3 server kind with a proxy in front.
func forEachS3(t *testing.T, seed uint64, test func(t *testing.T, p *testenv.S3Proxy, upstream *testenv.S3Server)) {
	for _, kind := range testenv.S3Kinds() {
		t.Run(kind, func(t *testing.T) {
			upstream := testenv.S3Of(t, kind)
			test(t, testenv.NewS3Proxy(t, upstream, seed), upstream)
		})
	}
}

// Without faults, signed requests of every kind pass through: conditional
// and streaming-signature PUTs, GET, HEAD, list and DELETE, on keys that
// need escaping.
func TestS3ProxyPassesSignedRequests(t *testing.T) {
	forEachS3(t, 1, func(t *testing.T, p *testenv.S3Proxy, upstream *testenv.S3Server) {
		ctx := t.Context()
		srv := p.Server()
		c := srv.Client(t)
		var (
			mu        sync.Mutex
			streaming int
		)
		// A rule that never fires, to see the requests as the proxy got them.
		p.Inject(testenv.Rule{Kind: testenv.InternalError, Match: testenv.Match{Func: func(r *http.Request) bool {
			if strings.HasPrefix(r.Header.Get("X-Amz-Content-Sha256"), "STREAMING-") {
				mu.Lock()
				streaming++
				mu.Unlock()
			}
			return false
		}}})
		body := bytes.Repeat([]byte("0123456789abcdef"), 300_000/16+7) // several 64 KiB signed chunks
		const key = "dir/a b+c=d~e,(1)&ü.json"
		if err := putIfAbsent(ctx, c, srv.Bucket, key, body); err != nil {
			t.Fatalf("conditional PUT through the proxy: %v", err)
		}
		if err := putIfAbsent(ctx, c, srv.Bucket, key, []byte("second")); minio.ToErrorResponse(err).StatusCode != http.StatusPreconditionFailed {
			t.Errorf("second conditional PUT error = %v, want 412 Precondition Failed", err)
		}
		if got, err := get(ctx, upstream.Client(t), upstream.Bucket, key); err != nil || !bytes.Equal(got, body) {
			t.Errorf("object on the server = %d bytes, %v; want the %d bytes sent", len(got), err, len(body))
		}
		if got, err := get(ctx, c, srv.Bucket, key); err != nil || !bytes.Equal(got, body) {
			t.Errorf("GET through the proxy = %d bytes, %v; want the %d bytes sent", len(got), err, len(body))
		}
		if info, err := c.StatObject(ctx, srv.Bucket, key, minio.StatObjectOptions{}); err != nil || info.Size != int64(len(body)) {
			t.Errorf("HEAD through the proxy = size %d, %v", info.Size, err)
		}
		var keys []string
		for obj := range c.ListObjectsIter(ctx, srv.Bucket, minio.ListObjectsOptions{Prefix: "dir/", Recursive: true}) {
			if obj.Err != nil {
				t.Fatalf("list through the proxy: %v", obj.Err)
			}
			keys = append(keys, obj.Key)
		}
		if !slices.Equal(keys, []string{key}) {
			t.Errorf("list through the proxy = %q, want [%q]", keys, key)
		}
		if err := c.RemoveObject(ctx, srv.Bucket, key, minio.RemoveObjectOptions{}); err != nil {
			t.Errorf("DELETE through the proxy: %v", err)
		}
		if _, err := c.StatObject(ctx, srv.Bucket, key, minio.StatObjectOptions{}); minio.ToErrorResponse(err).Code != minio.NoSuchKey {
			t.Errorf("HEAD after DELETE error = %v, want NoSuchKey", err)
		}
		if streaming == 0 {
			t.Errorf("no PUT used a streaming signature; the test does not cover aws-chunked bodies")
		}
		if n := len(p.Faults()); n != 0 {
			t.Errorf("Faults() = %v, want none", p.Faults())
		}
		var statuses []int
		var list bool
		for _, r := range p.Log() {
			statuses = append(statuses, r.Status)
			list = list || (r.List && r.Key == "dir/")
		}
		if want := []int{200, 412, 200, 200, 200, 204, 404}; !slices.Equal(statuses, want) {
			t.Errorf("statuses = %v, want %v", statuses, want)
		}
		if !list {
			t.Errorf("Log() = %+v, has no list of dir/", p.Log())
		}
		if p.Requests() != len(statuses) {
			t.Errorf("Requests() = %d, want %d", p.Requests(), len(statuses))
		}
	})
}

// A lost reply: the server applied the PUT, the client got no answer. A
// client that retries its create-if-absent then meets its own object.
func TestS3ProxyLostReply(t *testing.T) {
	forEachS3(t, 2, func(t *testing.T, p *testenv.S3Proxy, upstream *testenv.S3Server) {
		ctx := t.Context()
		srv := p.Server()
		lost := p.Inject(testenv.Rule{Kind: testenv.LostReply, Match: testenv.Match{Method: http.MethodPut, IfNoneMatch: true}})
		err := putIfAbsent(ctx, oneTry(t, srv), srv.Bucket, "log/0001.json", []byte("mine"))
		if err == nil || minio.ToErrorResponse(err).StatusCode != 0 {
			t.Fatalf("PUT whose reply was lost error = %v, want a connection error", err)
		}
		select {
		case <-lost.Fired():
		default:
			t.Errorf("Fired() not closed after the fault")
		}
		if got, err := get(ctx, upstream.Client(t), upstream.Bucket, "log/0001.json"); err != nil || string(got) != "mine" {
			t.Errorf("object on the server = %q, %v; want the PUT applied", got, err)
		}

		// minio-go retries by itself: the retry gets 412 for the
		// client's own write, the trap of issue 13.
		p.Inject(testenv.Rule{Kind: testenv.LostReply, Match: testenv.Match{Method: http.MethodPut, Key: `^log/0002\.json$`}})
		err = putIfAbsent(ctx, srv.Client(t), srv.Bucket, "log/0002.json", []byte("mine"))
		if minio.ToErrorResponse(err).StatusCode != http.StatusPreconditionFailed {
			t.Errorf("retried PUT after a lost reply error = %v, want 412", err)
		}
		if got := p.Counts(); got[testenv.LostReply] != 2 || len(got) != 1 {
			t.Errorf("Counts() = %v, want 2 LostReply", got)
		}
		faults := p.Faults()
		if len(faults) != 2 || faults[0].Key != "log/0001.json" || faults[1].Key != "log/0002.json" || faults[0].Method != http.MethodPut {
			t.Errorf("Faults() = %+v, want the two PUTs", faults)
		}
	})
}

// A lost reply is applied even when an outage closes the client's
// connection while the request is on its way to the server: the fault is
// what the proxy reports, not whatever the outage left of it. A second
// proxy that holds the PUT keeps it in flight while the outage starts.
func TestS3ProxyLostReplyOutlivesOutage(t *testing.T) {
	forEachS3(t, 9, func(t *testing.T, inner *testenv.S3Proxy, upstream *testenv.S3Server) {
		ctx := t.Context()
		inner.Inject(testenv.Rule{Kind: testenv.Delay, Delay: 300 * time.Millisecond, Match: testenv.Match{Method: http.MethodPut}})
		outer := testenv.NewS3Proxy(t, inner.Server(), 9)
		outer.Inject(testenv.Rule{Kind: testenv.LostReply, Match: testenv.Match{Method: http.MethodPut}})
		srv := outer.Server()
		done := make(chan error, 1)
		go func() { done <- putIfAbsent(ctx, oneTry(t, srv), srv.Bucket, "log/0001.json", []byte("mine")) }()
		waitUntil(t, "the PUT reaches the inner proxy", func() bool { return inner.Requests() == 1 })
		outer.Outage(time.Minute, testenv.OutageRefuse)
		if err := <-done; err == nil {
			t.Fatal("PUT during the outage succeeded, want a connection error")
		}
		waitUntil(t, "the inner proxy to be done with the PUT", func() bool { return len(inner.Faults()) == 1 })
		outer.EndOutage()
		if got, err := get(ctx, upstream.Client(t), upstream.Bucket, "log/0001.json"); err != nil || string(got) != "mine" {
			t.Errorf("object on the server = %q, %v; want the PUT whose reply was lost applied", got, err)
		}
		if log := outer.Log(); len(log) != 1 || log[0].Fault != testenv.LostReply {
			t.Errorf("outer proxy log = %+v, want one LostReply", log)
		}
	})
}

// waitUntil polls cond until it holds, failing the test after a minute.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A reset before forwarding: the client gets no answer and nothing is applied.
func TestS3ProxyResetIsNotApplied(t *testing.T) {
	forEachS3(t, 3, func(t *testing.T, p *testenv.S3Proxy, upstream *testenv.S3Server) {
		ctx := t.Context()
		srv := p.Server()
		p.Inject(testenv.Rule{Kind: testenv.Reset, Match: testenv.Match{Object: true, Key: `^reset/`}, Times: testenv.Always})
		err := putIfAbsent(ctx, oneTry(t, srv), srv.Bucket, "reset/k", []byte("x"))
		if err == nil || minio.ToErrorResponse(err).StatusCode != 0 {
			t.Fatalf("PUT that was reset error = %v, want a connection error", err)
		}
		if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
			t.Logf("reset PUT error (not ECONNRESET): %v", err)
		}
		if _, err := upstream.Client(t).StatObject(ctx, upstream.Bucket, "reset/k", minio.StatObjectOptions{}); minio.ToErrorResponse(err).Code != minio.NoSuchKey {
			t.Errorf("object on the server after a reset PUT: %v, want NoSuchKey", err)
		}
		if err := putIfAbsent(ctx, oneTry(t, srv), srv.Bucket, "other/k", []byte("x")); err != nil {
			t.Errorf("PUT of a key the rule does not match: %v", err)
		}
		if got := p.Counts()[testenv.Reset]; got != 1 {
			t.Errorf("Counts()[Reset] = %d, want 1", got)
		}
	})
}

// Error answers carry S3 error documents that clients parse, and are not
// applied.
func TestS3ProxyErrorReplies(t *testing.T) {
	forEachS3(t, 4, func(t *testing.T, p *testenv.S3Proxy, upstream *testenv.S3Server) {
		ctx := t.Context()
		srv := p.Server()
		for _, tc := range []struct {
			kind   testenv.Kind
			status int
			code   string
		}{
			{testenv.SlowDown, 503, "SlowDown"},
			{testenv.InternalError, 500, "InternalError"},
			{testenv.Unavailable, 503, "ServiceUnavailable"},
		} {
			t.Run(string(tc.kind), func(t *testing.T) {
				p.Clear()
				p.Inject(testenv.Rule{Kind: tc.kind, Times: 2})
				key := "err/" + string(tc.kind)
				err := putIfAbsent(ctx, oneTry(t, srv), srv.Bucket, key, []byte("x"))
				if er := minio.ToErrorResponse(err); er.StatusCode != tc.status || er.Code != tc.code || !strings.Contains(er.Message, "injected") {
					t.Errorf("PUT answered %s: status %d, code %q, message %q; want %d %s", tc.kind, er.StatusCode, er.Code, er.Message, tc.status, tc.code)
				}
				_, err = oneTry(t, srv).StatObject(ctx, srv.Bucket, key, minio.StatObjectOptions{})
				if er := minio.ToErrorResponse(err); er.StatusCode != tc.status {
					t.Errorf("HEAD answered %s: status %d (%v), want %d", tc.kind, er.StatusCode, err, tc.status)
				}
				if _, err := upstream.Client(t).StatObject(ctx, upstream.Bucket, key, minio.StatObjectOptions{}); minio.ToErrorResponse(err).Code != minio.NoSuchKey {
					t.Errorf("object on the server after a %s answer: %v, want NoSuchKey", tc.kind, err)
				}
			})
		}

		p.Clear()
		p.Inject(testenv.Rule{Kind: testenv.SlowDown, RetryAfter: 1500 * time.Millisecond})
		resp, err := http.Get(srv.URL + "/" + srv.Bucket + "/any")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Retry-After"); resp.StatusCode != 503 || got != "2" {
			t.Errorf("SlowDown with RetryAfter 1.5s: status %d, Retry-After %q; want 503, 2", resp.StatusCode, got)
		}
		if got := p.Counts(); got[testenv.SlowDown] != 3 || got[testenv.InternalError] != 2 || got[testenv.Unavailable] != 2 {
			t.Errorf("Counts() = %v", got)
		}
	})
}

// A delayed request is forwarded after the delay.
func TestS3ProxyDelay(t *testing.T) {
	forEachS3(t, 5, func(t *testing.T, p *testenv.S3Proxy, upstream *testenv.S3Server) {
		ctx := t.Context()
		srv := p.Server()
		p.Inject(testenv.Rule{Kind: testenv.Delay, Delay: 50 * time.Millisecond, Match: testenv.Match{Method: http.MethodPut}})
		if err := putIfAbsent(ctx, oneTry(t, srv), srv.Bucket, "slow", []byte("x")); err != nil {
			t.Fatalf("delayed PUT: %v", err)
		}
		if got, err := get(ctx, upstream.Client(t), upstream.Bucket, "slow"); err != nil || string(got) != "x" {
			t.Errorf("object on the server = %q, %v", got, err)
		}
		if got := p.Log(); len(got) != 1 || got[0].Fault != testenv.Delay || got[0].Status != 200 {
			t.Errorf("Log() = %+v, want one delayed PUT answered 200", got)
		}
	})
}

// Nth and Times pick requests by their order among the matching ones; the
// Match fields narrow which requests count.
func TestS3ProxyTargeting(t *testing.T) {
	forEachS3(t, 6, func(t *testing.T, p *testenv.S3Proxy, upstream *testenv.S3Server) {
		ctx := t.Context()
		srv := p.Server()
		c := oneTry(t, srv)
		if err := putIfAbsent(ctx, c, srv.Bucket, "data/1", []byte("x")); err != nil {
			t.Fatal(err)
		}
		p.Inject(testenv.Rule{Kind: testenv.InternalError, Match: testenv.Match{Method: http.MethodGet, Object: true}, Nth: 2, Times: 2})
		p.Inject(testenv.Rule{Kind: testenv.SlowDown, Match: testenv.Match{List: true, Key: `^data/`}})
		p.Inject(testenv.Rule{Kind: testenv.Unavailable, Match: testenv.Match{IfNoneMatch: true}})
		for range 4 {
			_, _ = get(ctx, c, srv.Bucket, "data/1")
		}
		for obj := range c.ListObjectsIter(ctx, srv.Bucket, minio.ListObjectsOptions{Prefix: "data/"}) {
			_ = obj
		}
		_, _ = c.PutObject(ctx, srv.Bucket, "data/2", bytes.NewReader([]byte("y")), 1, minio.PutObjectOptions{})
		_ = putIfAbsent(ctx, c, srv.Bucket, "data/3", []byte("z"))
		var got []string
		for _, r := range p.Log()[1:] {
			got = append(got, fmt.Sprintf("%s %s %s", r.Method, r.Key, r.Fault))
		}
		want := []string{
			"GET data/1 ", "GET data/1 InternalError", "GET data/1 InternalError", "GET data/1 ",
			"GET data/ SlowDown", "PUT data/2 ", "PUT data/3 Unavailable",
		}
		if !slices.Equal(got, want) {
			t.Errorf("requests and faults:\n got %q\nwant %q", got, want)
		}
	})
}

// An outage refuses, resets or answers 503 until it ends; then requests
// succeed again, on the same port.
func TestS3ProxyOutage(t *testing.T) {
	forEachS3(t, 7, func(t *testing.T, p *testenv.S3Proxy, upstream *testenv.S3Server) {
		ctx := t.Context()
		srv := p.Server()
		c := oneTry(t, srv) // one client throughout: its kept-alive connection must not outlive an outage
		if err := putIfAbsent(ctx, c, srv.Bucket, "k", []byte("x")); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			mode  testenv.OutageMode
			check func(err error) bool
		}{
			{testenv.OutageRefuse, func(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }},
			{testenv.OutageReset, func(err error) bool { return err != nil && minio.ToErrorResponse(err).StatusCode == 0 }},
			{testenv.OutageUnavailable, func(err error) bool { return minio.ToErrorResponse(err).Code == "ServiceUnavailable" }},
		} {
			t.Run(tc.mode.String(), func(t *testing.T) {
				p.Outage(time.Hour, tc.mode)
				for range 2 {
					if _, err := get(ctx, c, srv.Bucket, "k"); !tc.check(err) {
						t.Errorf("GET during a %v outage error = %v", tc.mode, err)
					}
				}
				p.EndOutage()
				if got, err := get(ctx, c, srv.Bucket, "k"); err != nil || string(got) != "x" {
					t.Errorf("GET after the outage = %q, %v", got, err)
				}
			})
		}
		if got := p.Counts(); got[testenv.Outage] != 3 || got[testenv.Unavailable] != 2 || got[testenv.Reset] < 2 {
			t.Errorf("Counts() = %v, want 3 outages, 2 Unavailable and at least 2 Reset", got)
		}

		// An outage ends by itself.
		p.Outage(10*time.Millisecond, testenv.OutageRefuse)
		for {
			conn, err := net.Dial("tcp", srv.Endpoint)
			if err == nil {
				conn.Close()
				break
			}
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("dial during the outage: %v, want connection refused", err)
			}
			select {
			case <-ctx.Done():
				t.Fatal("the outage did not end")
			case <-time.After(10 * time.Millisecond):
			}
		}
		if got, err := get(ctx, c, srv.Bucket, "k"); err != nil || string(got) != "x" {
			t.Errorf("GET after the outage ended by itself = %q, %v", got, err)
		}
	})
}

// A seeded Random run hits the same request numbers with the same kinds
// each time; another seed hits others.
func TestS3ProxyRandomIsReproducible(t *testing.T) {
	upstream := testenv.S3(t)
	run := func(seed uint64) []string {
		p := testenv.NewS3Proxy(t, upstream, seed)
		p.Random(0.3, testenv.LostReply, testenv.SlowDown, testenv.InternalError, testenv.Reset)
		srv := p.Server()
		c := oneTry(t, srv)
		for i := range 40 {
			body := []byte(fmt.Sprint(i))
			_, _ = c.PutObject(t.Context(), srv.Bucket, fmt.Sprintf("seed-%d/%02d", seed, i), bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{})
		}
		if p.Requests() != 40 {
			t.Errorf("seed %d: %d requests, want 40", seed, p.Requests())
		}
		var hits []string
		for _, f := range p.Faults() {
			hits = append(hits, fmt.Sprintf("%d:%s", f.N, f.Kind))
		}
		return hits
	}
	first, second, other := run(42), run(42), run(43)
	t.Logf("seed 42: %v", first)
	if len(first) == 0 || len(first) == 40 {
		t.Fatalf("seed 42 hit %d of 40 requests at rate 0.3", len(first))
	}
	if !slices.Equal(first, second) {
		t.Errorf("seed 42 twice:\n%v\n%v", first, second)
	}
	if slices.Equal(first, other) {
		t.Errorf("seeds 42 and 43 hit the same requests: %v", first)
	}
}

// Under concurrent load with mixed faults and an outage, every fault does
// what it says: a PUT whose reply was lost is on the server, a PUT that was
// reset or answered with an error is not.
func TestS3ProxyUnderLoad(t *testing.T) {
	forEachS3(t, 8, func(t *testing.T, p *testenv.S3Proxy, upstream *testenv.S3Server) {
		ctx := t.Context()
		srv := p.Server()
		p.Inject(testenv.Rule{Rate: 0.3, Delay: 5 * time.Millisecond, RetryAfter: time.Second,
			OneOf: []testenv.Kind{testenv.LostReply, testenv.SlowDown, testenv.InternalError, testenv.Unavailable, testenv.Reset, testenv.Delay}})
		const writers, puts = 6, 25
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				c := oneTry(t, srv)
				for i := range puts {
					if w == 0 && i == puts/2 {
						p.Outage(20*time.Millisecond, testenv.OutageRefuse)
					}
					key := fmt.Sprintf("load/%d/%02d", w, i)
					_ = putIfAbsent(ctx, c, srv.Bucket, key, []byte(key))
				}
			})
		}
		wg.Wait()
		p.EndOutage()

		log := p.Log()
		if p.Requests() != len(log) {
			t.Errorf("Requests() = %d, Log() has %d", p.Requests(), len(log))
		}
		total := 0
		for _, n := range p.Counts() {
			total += n
		}
		if total != len(p.Faults()) {
			t.Errorf("Counts() sum to %d, Faults() has %d", total, len(p.Faults()))
		}
		u := upstream.Client(t)
		checked := 0
		for _, r := range log {
			var want bool
			switch r.Fault {
			case "", testenv.Delay:
				if r.Status == 0 {
					continue // cut by the outage: applied or not
				}
				want = r.Status == http.StatusOK
			case testenv.LostReply:
				want = true
			default:
				want = false
			}
			checked++
			_, err := u.StatObject(ctx, upstream.Bucket, r.Key, minio.StatObjectOptions{})
			if got := err == nil; got != want {
				t.Errorf("request %d PUT %s, fault %q, status %d: on the server = %v (%v), want %v", r.N, r.Key, r.Fault, r.Status, got, err, want)
			}
		}
		t.Logf("%d requests (%d checked), faults %v", len(log), checked, p.Counts())
	})
}
