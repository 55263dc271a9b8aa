package s3

import (
	"cmp"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"

	"software.sslmate.com/src/go-pkcs12"
)

// The forms Settings take besides this package's client: the environment of a process that
// reads them with FromEnv (a pod, a child), and what another runtime needs (Spark's S3A options
// in package engine/spark, a JVM trust store). Every form takes its defaults from the methods
// below, so that all reach the same server in the same region.

// RegionOrDefault returns the region, DefaultRegion when none is set: the one region default
// of every form the settings take.
func (st Settings) RegionOrDefault() string { return cmp.Or(st.Region, DefaultRegion) }

// EndpointOrDefault returns the endpoint, AWSEndpoint when none is set.
func (st Settings) EndpointOrDefault() string { return cmp.Or(st.Endpoint, AWSEndpoint) }

// PathStyle reports whether buckets are addressed by path (http://host/bucket/key) rather than
// by virtual host: on every server but AWS S3 (MinIO, versitygw and most others).
func (st Settings) PathStyle() bool { return st.EndpointOrDefault() != AWSEndpoint }

// Secure reports whether the endpoint is reached over TLS.
func (st Settings) Secure() bool { return strings.HasPrefix(st.EndpointOrDefault(), "https://") }

// CAPEM returns the PEM certificates of the CAs to trust besides the system's: CABundle, else
// the contents of CAFile; nil when neither is set.
func (st Settings) CAPEM() ([]byte, error) {
	switch {
	case len(st.CABundle) > 0:
		return st.CABundle, nil
	case st.CAFile != "":
		pem, err := os.ReadFile(st.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read CA bundle: %w", err)
		}
		return pem, nil
	}
	return nil, nil
}

// An EnvVar is one environment variable.
type EnvVar struct{ Name, Value string }

// Env returns the environment variables that give a process reading FromEnv these settings,
// credentials left out: static keys and session tokens travel by reference (a pod's Secret
// keys) or are inherited, never written out here. The region is always set (RegionOrDefault);
// a CABundle held inline has no variable: CAFile names the file that holds it.
func (st Settings) Env() []EnvVar {
	env := []EnvVar{{EnvRegion, st.RegionOrDefault()}}
	add := func(name, value string) {
		if value != "" {
			env = append(env, EnvVar{name, value})
		}
	}
	add(EnvEndpoint, st.Endpoint)
	add(EnvCABundle, st.CAFile)
	if st.InsecureSkipVerify {
		add(EnvInsecureSkipVerify, "true")
	}
	add(EnvWebIdentityTokenFile, st.WebIdentityTokenFile)
	add(EnvRoleARN, st.RoleARN)
	add(EnvSTSEndpoint, st.STSEndpoint)
	if st.OperationTimeout > 0 {
		add(EnvOperationTimeout, st.OperationTimeout.String())
	}
	return env
}

// TrustStorePassword opens the trust stores TrustStore makes. A trust store holds no secret;
// PKCS#12 asks for a password all the same.
const TrustStorePassword = "lockstep"

// TrustStore returns a PKCS#12 trust store (Java 12 and later read it) holding the CAs of the
// settings' bundle (CAPEM) and the system's, for a JVM that must trust what this package's
// client trusts: a JVM's javax.net.ssl.trustStore replaces its own CAs, so the system's are
// added back, read from $SSL_CERT_FILE or the usual bundle of the distribution. It returns nil
// when the settings name no bundle. The same certificates give the same bytes (the salts derive
// from them), so that a rendered trust store changes only with its CAs.
func (st Settings) TrustStore() ([]byte, error) {
	bundle, err := st.CAPEM()
	if err != nil || bundle == nil {
		return nil, err
	}
	certs, err := parseCerts(bundle)
	if err != nil {
		return nil, fmt.Errorf("CA bundle %s: %w", cmp.Or(st.CAFile, "(inline)"), err)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("CA bundle %s holds no PEM certificate", cmp.Or(st.CAFile, "(inline)"))
	}
	if sys, err := systemCAs(); err == nil {
		certs = append(certs, sys...)
	}
	entries := make([]pkcs12.TrustStoreEntry, len(certs))
	h := sha256.New()
	for i, c := range certs {
		entries[i] = pkcs12.TrustStoreEntry{Cert: c, FriendlyName: fmt.Sprintf("%d %s", i, c.Subject)}
		h.Write(c.Raw)
	}
	seed := [32]byte(h.Sum(nil))
	ts, err := pkcs12.Modern2023.WithRand(rand.NewChaCha8(seed)).EncodeTrustStoreEntries(entries, TrustStorePassword)
	if err != nil {
		return nil, fmt.Errorf("encode the trust store: %w", err)
	}
	return ts, nil
}

// JavaTrustOptions are the JVM options that make a JVM trust the CAs of the trust store at path
// (TrustStore): Spark's S3A, like every TLS client of a JVM, trusts the JVM's trust store, and
// has no option of its own for a PEM bundle.
func JavaTrustOptions(path string) []string {
	return []string{
		"-Djavax.net.ssl.trustStore=" + path,
		"-Djavax.net.ssl.trustStoreType=PKCS12",
		"-Djavax.net.ssl.trustStorePassword=" + TrustStorePassword,
	}
}

// systemCertFiles are where Linux distributions keep their CA bundle (those crypto/x509 reads).
var systemCertFiles = []string{
	"/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Gentoo, distroless
	"/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL
	"/etc/ssl/ca-bundle.pem",             // OpenSUSE
	"/etc/pki/tls/cacert.pem",            // OpenELEC
	"/etc/ssl/cert.pem",                  // Alpine
}

// systemCAs returns the certificates of the system's CA bundle: $SSL_CERT_FILE, else the first
// of systemCertFiles that exists.
func systemCAs() ([]*x509.Certificate, error) {
	files := systemCertFiles
	if f := os.Getenv("SSL_CERT_FILE"); f != "" {
		files = []string{f}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err == nil {
			return parseCerts(data)
		}
	}
	return nil, os.ErrNotExist
}

// parseCerts returns the certificates of the PEM blocks in data, skipping other blocks.
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return certs, nil
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate: %w", err)
		}
		certs = append(certs, c)
	}
}
