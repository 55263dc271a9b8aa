package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// nodePKI is the certificate authority of the e2e node and the keys its components use;
// every file is PEM under dir.
type nodePKI struct {
	dir    string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

// path returns the file name of a PKI file (ca.crt, admin.key, ...).
func (p *nodePKI) path(name string) string { return filepath.Join(p.dir, name) }

// newNodePKI creates the CA, the API server's serving certificate (valid for the
// in-cluster names, the node's name and IP, loopback and the kubernetes Service IP), the
// client certificates of the admin (system:masters) and of the kubelet (system:node:NAME),
// and the service account signing key.
func newNodePKI(dir, node string, nodeIP, serviceIP net.IP) (*nodePKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	caCert, der, caKey, err := newCA("lockstep-e2e-ca", 30*24*time.Hour)
	if err != nil {
		return nil, fmt.Errorf("create the node's CA: %w", err)
	}
	p := &nodePKI{dir: dir, caCert: caCert, caKey: caKey}
	if err := p.writeCert("ca", der, caKey); err != nil {
		return nil, err
	}
	serving := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local", "localhost", node},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), nodeIP, serviceIP},
	}
	if err := p.issue("apiserver", serving); err != nil {
		return nil, err
	}
	clients := map[string]pkix.Name{
		"admin":   {CommonName: "lockstep-e2e-admin", Organization: []string{"system:masters"}},
		"kubelet": {CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
	}
	for name, subject := range clients {
		if err := p.issue(name, &x509.Certificate{Subject: subject, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			return nil, err
		}
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if err := writePEMKey(p.path("sa.key"), saKey); err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	return p, os.WriteFile(p.path("sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600)
}

// issue signs tmpl (subject, usages, names) with the CA and writes NAME.crt and NAME.key.
func (p *nodePKI) issue(name string, tmpl *x509.Certificate) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = p.caCert.NotBefore
	tmpl.NotAfter = p.caCert.NotAfter
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return fmt.Errorf("issue the %s certificate: %w", name, err)
	}
	return p.writeCert(name, der, key)
}

func (p *nodePKI) writeCert(name string, der []byte, key *ecdsa.PrivateKey) error {
	if err := os.WriteFile(p.path(name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return writePEMKey(p.path(name+".key"), key)
}

func writePEMKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}

// kubeconfig returns a kubeconfig for the API server at server, authenticating with the
// client certificate NAME.crt.
func (p *nodePKI) kubeconfig(server, name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: lockstep-e2e, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: %s, user: {client-certificate: %q, client-key: %q}}]
contexts: [{name: lockstep-e2e, context: {cluster: lockstep-e2e, user: %s}}]
current-context: lockstep-e2e
`, server, p.path("ca.crt"), name, p.path(name+".crt"), p.path(name+".key"), name)
}

// newCA makes a self-signed CA called name with a new P-256 key, valid from an hour ago
// (clocks differ) for validity, and returns its certificate, the certificate's DER and the
// key.
func newCA(name string, validity time.Duration) (*x509.Certificate, []byte, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	return cert, der, key, nil
}
