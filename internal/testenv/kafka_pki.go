package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// kafkaCA is a CA made for one broker and the serving certificate it signed.
type kafkaCA struct {
	caFile string // the CA's certificate, PEM
	cert   tls.Certificate
}

// newKafkaCA makes a CA, writes its certificate to dir/ca.crt and signs a serving
// certificate for host, 127.0.0.1 and localhost.
func newKafkaCA(dir, host string) (*kafkaCA, error) {
	caCert, caDER, caKey, err := newCA("lockstep test Kafka CA", 7*24*time.Hour)
	if err != nil {
		return nil, fmt.Errorf("create the Kafka test CA: %w", err)
	}
	now := time.Now()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kafka"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	} else {
		tmpl.DNSNames = append(tmpl.DNSNames, host)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("sign the Kafka broker's certificate: %w", err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		return nil, err
	}
	return &kafkaCA{caFile: caFile, cert: tls.Certificate{Certificate: [][]byte{der, caDER}, PrivateKey: key}}, nil
}

// writeKeystore writes cert's key (PKCS #8, unencrypted) and chain as a PEM keystore,
// the form Kafka reads with ssl.keystore.type=PEM.
func writeKeystore(path string, cert *tls.Certificate) error {
	if len(cert.Certificate) == 0 || cert.PrivateKey == nil {
		return errors.New("kafka: the TLS certificate has no chain or no private key")
	}
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return fmt.Errorf("kafka keystore: %w", err)
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key})
	for _, der := range cert.Certificate {
		data = append(data, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return os.WriteFile(path, data, 0o600)
}
