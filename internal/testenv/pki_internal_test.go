package testenv

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestTestCAsSign checks the two test PKIs built on newCA: the Kafka broker's certificate and
// the e2e node's API server certificate each verify against the CA certificate written
// beside them, for the names their clients dial.
func TestTestCAsSign(t *testing.T) {
	roots := func(t *testing.T, file string) *x509.CertPool {
		t.Helper()
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(data) {
			t.Fatalf("%s holds no PEM certificate", file)
		}
		return pool
	}
	verify := func(t *testing.T, pool *x509.CertPool, der []byte, name string) {
		t.Helper()
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: name}); err != nil {
			t.Errorf("certificate for %s: %v", name, err)
		}
	}

	t.Run("kafka", func(t *testing.T) {
		ca, err := newKafkaCA(t.TempDir(), "broker.test")
		if err != nil {
			t.Fatal(err)
		}
		pool := roots(t, ca.caFile)
		for _, name := range []string{"broker.test", "localhost", "127.0.0.1"} {
			verify(t, pool, ca.cert.Certificate[0], name)
		}
	})
	t.Run("node", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "pki")
		if _, err := newNodePKI(dir, "node1", net.IPv4(10, 0, 0, 2), net.IPv4(10, 96, 0, 1)); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, "apiserver.crt"))
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(data)
		if block == nil {
			t.Fatal("apiserver.crt holds no PEM block")
		}
		pool := roots(t, filepath.Join(dir, "ca.crt"))
		for _, name := range []string{"kubernetes.default.svc", "node1", "10.96.0.1"} {
			verify(t, pool, block.Bytes, name)
		}
	})
}
