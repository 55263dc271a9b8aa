package testenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/lockstep-dev/lockstep/checkpoint/s3"
)

// S3Server is a real S3 server on loopback and a fresh, empty bucket on it.
type S3Server struct {
	Kind      string // "versitygw", "minio" or "external"
	Endpoint  string // host:port
	URL       string // http://host:port, the form LOCKSTEP_S3_ENDPOINT takes
	AccessKey string
	SecretKey string
	Region    string
	Bucket    string
	// CAFile is a PEM file of the CA that signed the server's certificate, for an https:// URL
	// (S3TLS); empty for plain HTTP.
	CAFile string
}

// Env returns the environment variables that point Lockstep at this server.
func (s *S3Server) Env() []string {
	env := []string{
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_REGION=" + s.Region,
		"LOCKSTEP_S3_ENDPOINT=" + s.URL,
	}
	if s.CAFile != "" {
		env = append(env, "AWS_CA_BUNDLE="+s.CAFile)
	}
	return env
}

// Setenv points Lockstep in this process at this server for the rest of t: it sets Env's
// variables with t.Setenv, which restores them when t ends.
func (s *S3Server) Setenv(t testing.TB) {
	t.Helper()
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// Options returns the options that point package checkpoint/s3 (and so every
// S3 location of the engine) at this server.
func (s *S3Server) Options() []s3.Option {
	opts := []s3.Option{s3.WithEndpoint(s.URL), s3.WithRegion(s.Region), s3.WithCredentials(s.AccessKey, s.SecretKey, "")}
	if s.CAFile != "" {
		opts = append(opts, s3.WithCA(s.CAFile))
	}
	return opts
}

// Client returns a minio-go client for the server, for test set-up and checks.
func (s *S3Server) Client(t testing.TB) *minio.Client {
	t.Helper()
	opts := &minio.Options{
		Creds:  credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Region: s.Region,
		Secure: strings.HasPrefix(s.URL, "https://"),
	}
	if s.CAFile != "" {
		tr, err := minio.DefaultTransport(true)
		if err != nil {
			t.Fatalf("s3 client for %s: %v", s.URL, err)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: caPool(t, s.CAFile), MinVersion: tls.VersionTLS12}
		opts.Transport = tr
	}
	c, err := minio.New(s.Endpoint, opts)
	if err != nil {
		t.Fatalf("s3 client for %s: %v", s.URL, err)
	}
	return c
}

type s3Service struct {
	S3Server
	proc *process
}

// S3 returns the default S3 server of this test binary with a new bucket for
// this test: versitygw, or the first kind named by LOCKSTEP_TEST_S3.
// LOCKSTEP_TEST_S3_ENDPOINT points at a running server instead.
func S3(t testing.TB) *S3Server {
	t.Helper()
	return S3Of(t, S3Kinds()[0])
}

// S3Kinds lists the S3 servers a conformance suite should run on: the
// comma-separated LOCKSTEP_TEST_S3 (versitygw, minio), by default both.
func S3Kinds() []string {
	if os.Getenv("LOCKSTEP_TEST_S3_ENDPOINT") != "" {
		return []string{"external"}
	}
	if v := os.Getenv("LOCKSTEP_TEST_S3"); v != "" {
		return strings.Split(v, ",")
	}
	return []string{"versitygw", "minio"}
}

// S3Of returns the shared server of the given kind ("versitygw", "minio"),
// started on first use, with a new bucket for this test.
func S3Of(t testing.TB, kind string) *S3Server {
	t.Helper()
	return S3At(t, kind, "127.0.0.1")
}

// S3At is S3Of for a server listening on host instead of loopback: the e2e node's IP
// (Node.IP), so that pods reach it. Each (kind, host) is one shared server.
func S3At(t testing.TB, kind, host string) *S3Server {
	t.Helper()
	shared.mu.Lock()
	key := kind + "@" + host
	svc, ok := shared.s3[key]
	var err error
	if !ok {
		svc, err = startS3(kind, host)
		if shared.s3 == nil {
			shared.s3 = map[string]*s3Service{}
		}
		shared.s3[key] = svc // nil after a failed start: later tests fail fast too
	} else if svc == nil {
		err = fmt.Errorf("s3 server %s failed to start earlier in this test binary", kind)
	}
	shared.buckets++
	n := shared.buckets
	shared.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	s := svc.S3Server
	s.Bucket = bucketName(t.Name(), n)
	ctx := context.Background()
	if err := s.Client(t).MakeBucket(ctx, s.Bucket, minio.MakeBucketOptions{Region: s.Region}); err != nil {
		t.Fatalf("create bucket %s on %s: %v", s.Bucket, s.Kind, err)
	}
	return &s
}

var nonBucketChars = regexp.MustCompile(`[^a-z0-9-]+`)

// bucketName makes a valid, unique bucket name from a test name.
func bucketName(test string, n int) string {
	name := strings.Trim(nonBucketChars.ReplaceAllString(strings.ToLower(test), "-"), "-")
	prefix := fmt.Sprintf("t%d-", n)
	if len(name) > 63-len(prefix) {
		name = strings.TrimRight(name[:63-len(prefix)], "-")
	}
	return prefix + name
}

func startS3(kind, host string) (*s3Service, error) {
	const access, secret, region = "lockstep-test", "lockstep-test-secret", "us-east-1"
	if ep := os.Getenv("LOCKSTEP_TEST_S3_ENDPOINT"); ep != "" && kind == "external" {
		s := &s3Service{S3Server: S3Server{
			Kind: "external", URL: ep, Endpoint: strings.TrimPrefix(strings.TrimPrefix(ep, "http://"), "https://"),
			AccessKey: os.Getenv("AWS_ACCESS_KEY_ID"), SecretKey: os.Getenv("AWS_SECRET_ACCESS_KEY"),
			Region: region,
		}}
		if r := os.Getenv("AWS_REGION"); r != "" {
			s.Region = r
		}
		return s, nil
	}
	dir, err := sharedDir()
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(host, host) // the server's, and MinIO's console's
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(host, fmt.Sprint(ports[0]))
	name := kind
	if host != "127.0.0.1" {
		name = kind + "-" + host
	}
	data := filepath.Join(dir, name+"-data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	var (
		args, env []string
		ready     string
	)
	switch kind {
	case "versitygw":
		args = []string{"--port", addr, "--access", access, "--secret", secret, "--region", region, "posix", data}
		ready = "http://" + addr + "/"
	case "minio":
		args = []string{"server", "--quiet", "--address", addr, "--console-address", net.JoinHostPort(host, fmt.Sprint(ports[1])), data}
		env = []string{"MINIO_ROOT_USER=" + access, "MINIO_ROOT_PASSWORD=" + secret, "MINIO_BROWSER=off", "MINIO_REGION=" + region}
		ready = "http://" + addr + "/minio/health/ready"
	default:
		return nil, fmt.Errorf("s3 server kind %q (LOCKSTEP_TEST_S3): want versitygw or minio", kind)
	}
	bin, err := LookupTool(kind)
	if err != nil {
		return nil, err
	}
	p, err := startProcess(kind, bin, args, env, filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(httpReady(ready)); err != nil {
		return nil, err
	}
	shared.stops = append(shared.stops, p.stop)
	return &s3Service{proc: p, S3Server: S3Server{
		Kind: kind, Endpoint: addr, URL: "http://" + addr,
		AccessKey: access, SecretKey: secret, Region: region,
	}}, nil
}
