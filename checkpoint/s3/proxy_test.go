package s3_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// proxy is a testenv.S3Proxy whose request log a test can restart, for the
// tests that check which requests one operation sends.
type proxy struct {
	*testenv.S3Proxy
	mark int // requests before this index are not reported
}

func newProxy(t *testing.T, upstream *testenv.S3Server) *proxy {
	return &proxy{S3Proxy: testenv.NewS3Proxy(t, upstream, 1)}
}

// behindProxy opens a Store with opts, prefix q, on a new S3 server behind a new proxy.
func behindProxy(t *testing.T, opts ...s3.Option) (*testenv.S3Server, *proxy, *s3.Store) {
	t.Helper()
	srv := testenv.S3(t)
	p := newProxy(t, srv)
	return srv, p, open(t, p.server(), "q", opts...)
}

func (p *proxy) server() *testenv.S3Server { return p.Server() }

// reset removes the proxy's rules and restarts its request log.
func (p *proxy) reset() {
	p.Clear()
	p.mark = p.Requests()
}

// inject resets the proxy and adds one rule.
func (p *proxy) inject(r testenv.Rule) *testenv.Injection {
	p.reset()
	return p.Inject(r)
}

// requests describes the requests since the last reset: the method, and
// " If-None-Match" for a conditional one.
func (p *proxy) requests() []string {
	var got []string
	for _, r := range p.Log()[p.mark:] {
		desc := r.Method
		if r.IfNoneMatch {
			desc += " If-None-Match"
		}
		got = append(got, desc)
	}
	return got
}

// count returns how many requests since the last reset desc describes,
// with or without more words.
func (p *proxy) count(desc string) int {
	n := 0
	for _, r := range p.requests() {
		if r == desc || strings.HasPrefix(r, desc+" ") {
			n++
		}
	}
	return n
}

// answer returns a Custom handler that answers with an S3 error.
func answer(status int, code string) func(http.ResponseWriter, *http.Request, http.Handler) {
	return func(w http.ResponseWriter, r *http.Request, _ http.Handler) {
		testenv.WriteS3Error(w, r, status, code, code+" injected by the test proxy")
	}
}

// ignoreConditions returns a Custom handler that plays a server ignoring
// If-None-Match: it writes a conditional PUT's body unconditionally (with
// its own signature, since the header is signed) and answers 200.
func ignoreConditions(t *testing.T, upstream *testenv.S3Server) func(http.ResponseWriter, *http.Request, http.Handler) {
	return func(w http.ResponseWriter, r *http.Request, _ http.Handler) {
		body, err := readBody(r)
		if err != nil {
			t.Errorf("proxy: read body: %v", err)
			testenv.WriteS3Error(w, r, http.StatusInternalServerError, "InternalError", err.Error())
			return
		}
		key := strings.TrimPrefix(r.URL.Path, "/"+upstream.Bucket+"/")
		info, err := upstream.Client(t).PutObject(r.Context(), upstream.Bucket, key, bytes.NewReader(body), int64(len(body)),
			minio.PutObjectOptions{DisableMultipart: true})
		if err != nil {
			t.Errorf("proxy: unconditional PUT of %s: %v", key, err)
			testenv.WriteS3Error(w, r, http.StatusInternalServerError, "InternalError", err.Error())
			return
		}
		w.Header().Set("ETag", `"`+info.ETag+`"`)
		w.WriteHeader(http.StatusOK)
	}
}

// readBody returns a PUT's payload, decoding aws-chunked (streaming
// signature) bodies.
func readBody(r *http.Request) ([]byte, error) {
	if !strings.HasPrefix(r.Header.Get("X-Amz-Content-Sha256"), "STREAMING-") {
		return io.ReadAll(r.Body)
	}
	var out bytes.Buffer
	br := bufio.NewReader(r.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("chunk header: %w", err)
		}
		size, _, _ := strings.Cut(strings.TrimSpace(line), ";")
		n, err := strconv.ParseInt(size, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("chunk size %q: %w", size, err)
		}
		if n == 0 {
			return out.Bytes(), nil
		}
		if _, err := io.CopyN(&out, br, n); err != nil {
			return nil, err
		}
		if _, err := br.Discard(2); err != nil { // \r\n
			return nil, err
		}
	}
}
