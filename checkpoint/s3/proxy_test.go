package s3_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// proxy is an HTTP proxy in front of the real S3 server that records the
// requests and lets a test answer some of them itself, to play a faulty
// server or a faulty network.
type proxy struct {
	t        *testing.T
	upstream *testenv.S3Server
	srv      *httptest.Server
	forward  *httputil.ReverseProxy

	mu  sync.Mutex
	log []string
	// intercept, when set, may answer request number n (from 0, counted
	// since the last reset) itself by returning true.
	intercept func(w http.ResponseWriter, r *http.Request, n int) bool
}

func newProxy(t *testing.T, upstream *testenv.S3Server) *proxy {
	u, err := url.Parse(upstream.URL)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, upstream: upstream, forward: httputil.NewSingleHostReverseProxy(u)}
	// The client signs the Host header: keep the proxy's, which the
	// server then checks against the signature.
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *proxy) serve(w http.ResponseWriter, r *http.Request) {
	desc := r.Method
	if r.Header.Get("If-None-Match") != "" {
		desc += " If-None-Match"
	}
	p.mu.Lock()
	n := len(p.log)
	p.log = append(p.log, desc)
	intercept := p.intercept
	p.mu.Unlock()
	if intercept != nil && intercept(w, r, n) {
		return
	}
	p.forward.ServeHTTP(w, r)
}

// server describes the proxy as an S3 server with the upstream's bucket and
// credentials.
func (p *proxy) server() *testenv.S3Server {
	s := *p.upstream
	s.URL = p.srv.URL
	s.Endpoint = strings.TrimPrefix(p.srv.URL, "http://")
	return &s
}

func (p *proxy) setIntercept(f func(w http.ResponseWriter, r *http.Request, n int) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.intercept = f
	p.log = nil
}

func (p *proxy) reset() { p.setIntercept(nil) }

func (p *proxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

func (p *proxy) count(desc string) int {
	n := 0
	for _, r := range p.requests() {
		if r == desc || strings.HasPrefix(r, desc+" ") {
			n++
		}
	}
	return n
}

// s3Error answers with an S3 error document.
func s3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected by the test proxy</Message></Error>`, code)
}

// ignoreConditions plays a server that ignores If-None-Match: it writes a
// conditional PUT's body unconditionally (with its own signature, since the
// header is signed) and answers 200.
func (p *proxy) ignoreConditions(w http.ResponseWriter, r *http.Request, _ int) bool {
	if r.Method != http.MethodPut || r.Header.Get("If-None-Match") == "" {
		return false
	}
	body, err := readBody(r)
	if err != nil {
		p.t.Errorf("proxy: read body: %v", err)
		s3Error(w, http.StatusInternalServerError, "InternalError")
		return true
	}
	key := strings.TrimPrefix(r.URL.Path, "/"+p.upstream.Bucket+"/")
	info, err := p.upstream.Client(p.t).PutObject(r.Context(), p.upstream.Bucket, key, bytes.NewReader(body), int64(len(body)),
		minio.PutObjectOptions{DisableMultipart: true})
	if err != nil {
		p.t.Errorf("proxy: unconditional PUT of %s: %v", key, err)
		s3Error(w, http.StatusInternalServerError, "InternalError")
		return true
	}
	w.Header().Set("ETag", `"`+info.ETag+`"`)
	w.WriteHeader(http.StatusOK)
	return true
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
