package s3_test

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"software.sslmate.com/src/go-pkcs12"

	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// Env is FromEnv's inverse, credentials left out, and always names the region: the one
// default, also when the settings leave it empty.
func TestSettingsEnv(t *testing.T) {
	st := s3.Settings{
		Endpoint: "https://minio.example:9000", Region: "eu-west-1",
		AccessKey: "id", SecretKey: "secret", SessionToken: "token",
		WebIdentityTokenFile: "/var/run/token", RoleARN: "arn:aws:iam::1:role/r", STSEndpoint: "https://sts.example",
		CAFile: "/etc/lockstep/ca.crt", InsecureSkipVerify: true, OperationTimeout: 90 * time.Second,
	}
	env := map[string]string{}
	for _, e := range st.Env() {
		env[e.Name] = e.Value
	}
	for _, secret := range []string{s3.EnvAccessKey, s3.EnvSecretKey, s3.EnvSessionToken} {
		if _, ok := env[secret]; ok {
			t.Errorf("Env names %s: credentials go by reference", secret)
		}
	}
	got, err := s3.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := st
	want.AccessKey, want.SecretKey, want.SessionToken = "", "", ""
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FromEnv(Env()) (-want +got):\n%s", diff)
	}

	var zero s3.Settings
	if diff := cmp.Diff([]s3.EnvVar{{Name: s3.EnvRegion, Value: s3.DefaultRegion}}, zero.Env()); diff != "" {
		t.Errorf("Env of the zero settings (-want +got):\n%s", diff)
	}
	if zero.RegionOrDefault() != s3.DefaultRegion || zero.EndpointOrDefault() != s3.AWSEndpoint || zero.PathStyle() || !zero.Secure() {
		t.Errorf("zero settings: region %q, endpoint %q, path style %v, secure %v; want AWS S3 in %s",
			zero.RegionOrDefault(), zero.EndpointOrDefault(), zero.PathStyle(), zero.Secure(), s3.DefaultRegion)
	}
	minio := s3.Settings{Endpoint: "http://127.0.0.1:9000"}
	if !minio.PathStyle() || minio.Secure() {
		t.Errorf("%s: path style %v, secure %v; want path style without TLS", minio.Endpoint, minio.PathStyle(), minio.Secure())
	}
}

// TrustStore holds the bundle's CAs first, then the system's; the same CAs give the same bytes;
// no bundle, no trust store.
func TestTrustStore(t *testing.T) {
	srv := testenv.S3TLS(t, testenv.S3(t))
	pemData, err := os.ReadFile(srv.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(pemData)
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := s3.Settings{CAFile: srv.CAFile}.TrustStore()
	if err != nil {
		t.Fatal(err)
	}
	inline, err := s3.Settings{CABundle: pemData}.TrustStore()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fromFile, inline) {
		t.Error("the same CAs gave two different trust stores")
	}
	certs, err := pkcs12.DecodeTrustStore(fromFile, s3.TrustStorePassword)
	if err != nil {
		t.Fatalf("decode the trust store: %v", err)
	}
	if len(certs) == 0 || !certs[0].Equal(ca) {
		t.Fatalf("the trust store's first certificate is not the bundle's (%d certificates)", len(certs))
	}
	if sys, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt"); err == nil && bytes.Contains(sys, []byte("BEGIN CERTIFICATE")) && len(certs) < 2 {
		t.Errorf("the trust store holds %d certificates: the system's CAs are missing", len(certs))
	}

	if ts, err := (s3.Settings{}).TrustStore(); ts != nil || err != nil {
		t.Errorf("TrustStore without a bundle = %d bytes, %v; want none", len(ts), err)
	}
	if _, err := (s3.Settings{CABundle: []byte("not a certificate")}).TrustStore(); err == nil {
		t.Error("TrustStore of a bundle without a certificate succeeded")
	}
	if _, err := (s3.Settings{CAFile: "/no/such/ca.pem"}).TrustStore(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("TrustStore of a missing bundle = %v, want ErrNotExist", err)
	}
}

// A server whose certificate a CA bundle signed is reached over TLS with the bundle (file or
// inline), and refused without it.
func TestTLSWithCABundle(t *testing.T) {
	srv := testenv.S3TLS(t, testenv.S3(t))
	pemData, err := os.ReadFile(srv.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for name, opt := range map[string]s3.Option{
		"file":   s3.WithCA(srv.CAFile),
		"inline": s3.WithSettings(s3.Settings{Endpoint: srv.URL, Region: srv.Region, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, CABundle: pemData}),
	} {
		st, err := s3.Open(ctx, srv.Bucket, "tls-"+name, append(serverOptions(srv), opt)...)
		if err != nil {
			t.Fatalf("%s: Open over TLS: %v", name, err)
		}
		if err := st.Put(ctx, "a", []byte("x")); err != nil {
			t.Fatalf("%s: Put over TLS: %v", name, err)
		}
	}
	if _, err := s3.Open(ctx, srv.Bucket, "tls-untrusted", serverOptions(srv)...); err == nil {
		t.Fatal("Open over TLS without the CA bundle succeeded")
	}
}
