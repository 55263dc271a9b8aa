package testenv

import (
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// S3TLS returns upstream behind a TLS front on loopback: the same kind, bucket, credentials
// and region at an https:// URL, whose certificate (for 127.0.0.1, signed by itself) is in the
// PEM file CAFile. Requests pass through unchanged (the Host header the client signed, the body
// streamed), so that a client that trusts CAFile reaches the real server over TLS, and one that
// does not is refused. The front stops at the test's cleanup.
func S3TLS(t testing.TB, upstream *S3Server) *S3Server {
	t.Helper()
	target, err := url.Parse(upstream.URL)
	if err != nil || target.Host == "" {
		t.Fatalf("s3 tls front: upstream URL %q: %v", upstream.URL, err)
	}
	front := httptest.NewUnstartedServer(&httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = target.Scheme, target.Host
		},
		Transport:     &http.Transport{Proxy: nil, DisableCompression: true},
		FlushInterval: -1,
	})
	front.StartTLS()
	t.Cleanup(front.Close)
	caFile := filepath.Join(t.TempDir(), "s3-ca.pem")
	block := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: front.Certificate().Raw})
	if err := os.WriteFile(caFile, block, 0o644); err != nil {
		t.Fatalf("s3 tls front: %v", err)
	}
	s := *upstream
	s.URL = front.URL // https://127.0.0.1:port
	s.Endpoint = strings.TrimPrefix(front.URL, "https://")
	s.CAFile = caFile
	t.Logf("s3 tls front %s in front of %s %s", s.URL, upstream.Kind, upstream.URL)
	return &s
}

// caPool returns the system's CAs and those of the PEM file caFile.
func caPool(t testing.TB, caFile string) *x509.CertPool {
	t.Helper()
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	data, err := os.ReadFile(caFile)
	if err != nil || !pool.AppendCertsFromPEM(data) {
		t.Fatalf("CA file %s: %v", caFile, err)
	}
	return pool
}
