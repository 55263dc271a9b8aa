package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// RegistryVersion is the Apicurio Registry release the tests run, kept equal to
// APICURIO_VERSION in hack/versions.env: `make tools` builds it (hack/registry/pom.xml says
// why this release) into $LOCKSTEP_TOOLS/apicurio-registry-RegistryVersion.
const RegistryVersion = "2.1.5.Final"

// RegistryUser and RegistryPassword are the user every registry of this package requires,
// by HTTP basic authentication, on its API.
const (
	RegistryUser     = "alice"
	RegistryPassword = "s3cret"
)

// registryStartTimeout bounds a registry's start: a Quarkus application on a JVM, 5–15 s
// on a loaded 2-core machine.
const registryStartTimeout = 2 * time.Minute

// registryAPI is the path under which Apicurio serves the Confluent Schema Registry API.
const registryAPI = "/apis/ccompat/v6"

// Registry is a running Schema Registry: Apicurio Registry with its Confluent-compatible
// API, in-memory storage, basic authentication as RegistryUser, on plain HTTP and TLS.
type Registry struct {
	// URL is the Confluent-compatible API over plain HTTP (http://127.0.0.1:PORT/apis/ccompat/v6),
	// the base URL a Confluent client (franz-go's pkg/sr) takes.
	URL string
	// TLSURL is the same API over TLS, its certificate signed by the CA in CAFile.
	TLSURL string
	// CAFile is the PEM file of the CA that signed the TLS listener's certificate.
	CAFile string
	// User and Password are the credentials the API requires (RegistryUser, RegistryPassword).
	User, Password string
}

// SchemaRegistry returns the shared Schema Registry of this test binary, started on
// first use on loopback ports. Subjects are shared by every test of the binary and never
// emptied: a test names its subjects after its own topics ([KafkaTopic] or a name with
// the test's). The package's TestMain must be [Main].
func SchemaRegistry(t testing.TB) Registry {
	t.Helper()
	r, err := sharedRegistry()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// sharedRegistry starts the shared registry on first use.
func sharedRegistry() (Registry, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.registry != nil || shared.registryErr != nil {
		if shared.registryErr != nil {
			return Registry{}, shared.registryErr
		}
		return *shared.registry, nil
	}
	if err := needMain(); err != nil {
		return Registry{}, err
	}
	dir, err := sharedDir()
	if err != nil {
		return Registry{}, err
	}
	r, p, err := startRegistry(filepath.Join(dir, "registry"))
	if err != nil {
		shared.registryErr = err
		return Registry{}, err
	}
	shared.stops = append(shared.stops, p.kill)
	shared.registry = &r
	return r, nil
}

// startRegistry writes a registry's TLS files into dir, runs it and waits until its API
// answers an authenticated request.
func startRegistry(dir string) (Registry, *process, error) {
	java, err := LookupTool("java")
	if err != nil { // linked into the cache by the kafka step of hack/tools.sh
		return Registry{}, nil, &MissingToolError{Name: "registry", Path: filepath.Join(ToolsDir(), "java")}
	}
	home := filepath.Join(filepath.Dir(ToolsDir()), "apicurio-registry-"+RegistryVersion)
	jar := filepath.Join(home, "apicurio-registry-runner.jar")
	if _, err := os.Stat(jar); err != nil {
		return Registry{}, nil, &MissingToolError{Name: "registry", Path: jar}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Registry{}, nil, err
	}
	ports, err := freePorts("127.0.0.1", "127.0.0.1")
	if err != nil {
		return Registry{}, nil, err
	}
	httpPort, tlsPort := ports[0], ports[1]
	ca, err := newKafkaCA(dir, "127.0.0.1")
	if err != nil {
		return Registry{}, nil, err
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := writeCertAndKey(certFile, keyFile, &ca.cert); err != nil {
		return Registry{}, nil, err
	}
	r := Registry{
		URL:      fmt.Sprintf("http://127.0.0.1:%d%s", httpPort, registryAPI),
		TLSURL:   fmt.Sprintf("https://127.0.0.1:%d%s", tlsPort, registryAPI),
		CAFile:   ca.caFile,
		User:     RegistryUser,
		Password: RegistryPassword,
	}
	args := []string{
		// Sized for a 2-core machine shared by several test binaries: a small heap, one GC
		// thread, the client compiler only (a faster start, less CPU for the JIT).
		"-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:CICompilerCount=1",
		"-Djava.io.tmpdir=" + dir,
		"-Dquarkus.http.host=127.0.0.1",
		fmt.Sprintf("-Dquarkus.http.port=%d", httpPort),
		fmt.Sprintf("-Dquarkus.http.ssl-port=%d", tlsPort),
		"-Dquarkus.http.ssl.certificate.file=" + certFile,
		"-Dquarkus.http.ssl.certificate.key-file=" + keyFile,
		"-Dquarkus.security.users.embedded.users." + RegistryUser + "=" + RegistryPassword,
		"-Dquarkus.security.users.embedded.roles." + RegistryUser + "=user",
		"-Dquarkus.log.level=WARN",
		"-Dquarkus.log.category.\"io.quarkus.bootstrap.runner.Timing\".level=INFO",
		"-Dquarkus.http.io-threads=2",
		"-Dquarkus.thread-pool.max-threads=8",
		"-Dquarkus.datasource.jdbc.min-size=1",
		"-Dquarkus.datasource.jdbc.initial-size=1",
		"-Dquarkus.datasource.jdbc.max-size=8",
		"-jar", jar,
	}
	p, err := startProcess("apicurio-registry", java, args, nil, filepath.Join(dir, "registry.log"))
	if err != nil {
		return Registry{}, nil, err
	}
	if err := p.waitReadyWithin(registryStartTimeout, registryReady(r)); err != nil {
		return Registry{}, nil, err
	}
	return r, p, nil
}

// Client returns an HTTP client that trusts the registry's TLS certificate.
func (r Registry) Client() (*http.Client, error) {
	pemCA, err := os.ReadFile(r.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemCA) {
		return nil, fmt.Errorf("no certificate in %s", r.CAFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}, nil
}

// registryReady answers when the registry lists its subjects to RegistryUser.
func registryReady(r Registry) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL+"/subjects", nil)
		if err != nil {
			return err
		}
		req.SetBasicAuth(r.User, r.Password)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			var op *net.OpError
			if errors.As(err, &op) {
				return fmt.Errorf("not listening yet: %w", err)
			}
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s/subjects: %s", r.URL, resp.Status)
		}
		return nil
	}
}

// writeCertAndKey writes cert's chain and its key (PKCS #8) to two PEM files, the form
// Quarkus reads (quarkus.http.ssl.certificate.file and key-file).
func writeCertAndKey(certFile, keyFile string, cert *tls.Certificate) error {
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return fmt.Errorf("registry TLS key: %w", err)
	}
	var chain []byte
	for _, der := range cert.Certificate {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	if err := os.WriteFile(certFile, chain, 0o600); err != nil {
		return err
	}
	return os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600)
}
