//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/controller"
	"github.com/lockstep-dev/lockstep/engine/webhook"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestKafkaSASLAndTLSFromSecrets: a Kafka source on a broker that takes only TLS
// connections with a client certificate it trusts and SCRAM-SHA-512 users reads its
// credentials from Secrets of the query's namespace, created as a user creates them
// (`kubectl create secret generic` with username and password, one with ca.crt, `kubectl
// create secret tls`). The engine reads every record, and no secret value is in the
// ConfigMap, the workload, the status, an event or a log.
func TestKafkaSASLAndTLSFromSecrets(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	ca := newTestCA(t)
	serverCert, _ := ca.issue(t, "kafka", net.ParseIP(tn.in.node.IP))
	_, clientPEM := ca.issue(t, "orders-engine", nil)
	adminCert, _ := ca.issue(t, "e2e-producer", nil)
	password, adminPassword := randomValue(t), randomValue(t)
	addr := secureKafka(t, tn.in.node.IP, ca, serverCert,
		testenv.KafkaCredentials{Name: "orders-engine", Password: password},
		testenv.KafkaCredentials{Name: "e2e-producer", Password: adminPassword})

	// The test's own producer passes the same gate: TLS with a client certificate, SCRAM.
	kc, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("orders"),
		kgo.DialTLSConfig(&tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{adminCert}, MinVersion: tls.VersionTLS12}),
		kgo.SASL(scram.Auth{User: "e2e-producer", Pass: adminPassword}.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	produce := func(first, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := first; i < first+n; i++ {
			recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, `{"id":"o%d","amount":%d.5}`, i, i)})
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := kc.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce to the TLS and SASL broker: %v", err)
		}
	}
	produce(0, 10)

	dir := t.TempDir()
	caFile, certFile, keyFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeFile(t, caFile, ca.certPEM)
	writeFile(t, certFile, clientPEM.cert)
	writeFile(t, keyFile, clientPEM.key)
	tn.kubectl(nil, "-n", tn.ns, "create", "secret", "generic", "kafka-user",
		"--from-literal=username=orders-engine", "--from-literal=password="+password)
	tn.kubectl(nil, "-n", tn.ns, "create", "secret", "generic", "kafka-ca", "--from-file=ca.crt="+caFile)
	tn.kubectl(nil, "-n", tn.ns, "create", "secret", "tls", "kafka-client", "--cert="+certFile, "--key="+keyFile)

	tn.apply(fmt.Sprintf(`apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: orders}
spec:
  sources:
  - name: orders
    kafka:
      bootstrapServers: [%q]
      topics: [orders]
      startingOffsets: earliest
      format: json
      sasl: {mechanism: SCRAM-SHA-512, secretName: kafka-user}
      tls: {caSecretName: kafka-ca, clientSecretName: kafka-client}
    schema: {columns: [{name: id, type: string}, {name: amount, type: double}]}
  sink:
    files: {path: %s, format: json}
  outputMode: append
  trigger: {processingTime: 1s}
  checkpoint: {store: %s}
`, addr, tn.location("out/orders"), tn.store))
	q := tn.committed("orders", 0)
	if q.Status.Guarantee != v1.GuaranteeExactlyOnce {
		t.Errorf("guarantee %q (%q), want exactly-once", q.Status.Guarantee, q.Status.GuaranteeReason)
	}
	produce(10, 10)
	tn.eventually("the engine reads every record through TLS and SASL", func() error {
		if _, rows := tn.sinkRows("out/orders"); len(rows) != 20 {
			return fmt.Errorf("sink rows = %d, want 20; conditions %s", len(rows), conditions(tn.query("orders")))
		}
		return nil
	})

	// The pod got the Secrets by reference: variables from secretKeyRef, files from mounts.
	pod := tn.readyPod("orders")
	var mounted []string
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil {
			mounted = append(mounted, v.Secret.SecretName)
		}
	}
	slices.Sort(mounted)
	if want := []string{"kafka-ca", "kafka-client"}; !slices.Equal(mounted, want) {
		t.Errorf("Secret volumes %v, want %v", mounted, want)
	}
	tn.noSecretValues("orders", map[string]string{
		"the SASL password":       password,
		"the client key":          pemBody(clientPEM.key),
		"the producer's password": adminPassword,
	})
}

// TestWebhookHeadersFromSecret: a webhook sink whose Authorization and X-Tenant headers come
// from a Secret (one key per header) delivers every batch with them to a receiver on the
// node's address; the receiver answers the first batch it takes with 503 (as if it had timed
// out), so that the sink sends it again, and it de-duplicates by Idempotency-Key as the
// at-least-once guarantee asks. The de-duplicated rows are the rate source's values 0..n-1,
// each once; no secret value is in the ConfigMap, the workload, the status, an event or a log.
func TestWebhookHeadersFromSecret(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	token := randomValue(t)
	rcv := newWebhookReceiver(t, tn.in.node.IP, http.Header{
		"Authorization": {"Bearer " + token},
		"X-Tenant":      {"payments"},
		"X-Source":      {"e2e"}, // from the spec's headers, not the Secret
	})
	tn.kubectl(nil, "-n", tn.ns, "create", "secret", "generic", "webhook-headers",
		"--from-literal=Authorization=Bearer "+token, "--from-literal=X-Tenant=payments")
	manifest := fmt.Sprintf(`apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: ticks}
spec:
  sources:
  - name: ticks
    rate: {rowsPerSecond: 20}
  sink:
    webhook:
      url: %s
      headers: {X-Source: e2e}
      headersSecretName: webhook-headers
  outputMode: append
  trigger: {processingTime: 1s}
  checkpoint: {store: %s}
`, rcv.url, tn.store)
	tn.apply(manifest)
	q := tn.committed("ticks", 3)
	if q.Status.Guarantee != v1.GuaranteeAtLeastOnce || !strings.Contains(q.Status.GuaranteeReason, webhook.IdempotencyKeyHeader) {
		t.Errorf("guarantee %q (%q), want at-least-once, naming the %s", q.Status.Guarantee, q.Status.GuaranteeReason, webhook.IdempotencyKeyHeader)
	}
	tn.noSecretValues("ticks", map[string]string{"the bearer token": token})
	// Suspend, so that the deliveries stop with every committed batch delivered.
	tn.apply(strings.Replace(manifest, "  checkpoint:", "  suspend: true\n  checkpoint:", 1))
	tn.eventually("the query is suspended and its pod gone", func() error {
		if q := tn.query("ticks"); q.Status.Phase != v1.PhaseSuspended {
			return fmt.Errorf("phase %s; conditions %s", q.Status.Phase, conditions(q))
		}
		if pods := tn.pods("ticks"); len(pods) != 0 {
			return fmt.Errorf("%d engine pods left", len(pods))
		}
		return nil
	})
	q = tn.query("ticks")
	last := *q.Status.LatestCommittedBatch

	deliveries, refused, batches, err := rcv.result(q.Status.QueryID)
	if err != nil {
		t.Fatal(err)
	}
	if refused > 0 {
		t.Errorf("%d requests came without the Secret's headers (see the log above)", refused)
	}
	if len(batches) != deliveries-1 {
		t.Errorf("%d deliveries of %d batches: want exactly one repeat, of the delivery answered 503", deliveries, len(batches))
	}
	// Batches with rows were delivered, each under its key; batch 0 of a rate source may be empty.
	var values []int64
	for id := range last + 1 {
		rows, ok := batches[id]
		if !ok && id > 0 {
			t.Errorf("committed batch %d was not delivered", id)
		}
		values = append(values, rows...)
	}
	if len(batches) > int(last)+1 {
		t.Errorf("%d batches delivered, more than the %d committed", len(batches), last+1)
	}
	slices.Sort(values)
	if err := contiguous(values); err != nil {
		t.Error(err)
	}
}

// webhookReceiver is the HTTP endpoint a webhook sink posts to, on the node's address: it
// checks each request's headers, takes each batch once by its Idempotency-Key, and answers
// the first batch it takes with 503, as a receiver that timed out after taking it would.
type webhookReceiver struct {
	t    *testing.T
	url  string
	want http.Header

	mu         sync.Mutex
	deliveries int
	refused    int
	failedOnce bool
	bodies     map[string][]byte // by Idempotency-Key
	errs       []error
}

func newWebhookReceiver(t *testing.T, host string, want http.Header) *webhookReceiver {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	r := &webhookReceiver{t: t, url: "http://" + l.Addr().String() + "/batches", want: want, bodies: map[string][]byte{}}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }() // ends when the cleanup closes the server
	t.Cleanup(func() { _ = srv.Close() })
	return r
}

func (r *webhookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deliveries++
	if err != nil {
		r.errs = append(r.errs, err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for k := range r.want {
		if got := req.Header.Get(k); got != r.want.Get(k) {
			r.refused++
			r.t.Logf("webhook receiver: request %s without header %s (%d bytes)", req.Header.Get(webhook.IdempotencyKeyHeader), k, len(got))
			http.Error(w, "missing or wrong "+k, http.StatusUnauthorized)
			return
		}
	}
	key := req.Header.Get(webhook.IdempotencyKeyHeader)
	if prev, seen := r.bodies[key]; seen {
		if !bytes.Equal(prev, body) {
			r.errs = append(r.errs, fmt.Errorf("key %s repeated with another body:\n%s\nfirst:\n%s", key, body, prev))
		}
		w.WriteHeader(http.StatusOK) // a repeat: acknowledged, not taken again
		return
	}
	r.bodies[key] = body
	if !r.failedOnce {
		r.failedOnce = true
		http.Error(w, "taken, but answered as if it timed out", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// result returns the number of requests, of those refused for their headers, and the
// "value" column of each batch of query id that was taken, by batch id.
func (r *webhookReceiver) result(queryID string) (deliveries, refused int, batches map[int64][]int64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) > 0 {
		return 0, 0, nil, fmt.Errorf("webhook receiver: %v", r.errs)
	}
	batches = map[int64][]int64{}
	for key, body := range r.bodies {
		var b struct {
			QueryID string `json:"queryId"`
			BatchID int64  `json:"batchId"`
			Chunks  int    `json:"chunks"`
			Rows    []struct {
				Value int64 `json:"value"`
			} `json:"rows"`
		}
		if err := json.Unmarshal(body, &b); err != nil {
			return 0, 0, nil, fmt.Errorf("body of %s: %w\n%s", key, err, body)
		}
		if b.QueryID != queryID || b.Chunks != 1 || key != fmt.Sprintf("%s:%d", b.QueryID, b.BatchID) {
			return 0, 0, nil, fmt.Errorf("request %s carries query %s batch %d of %d chunks, want query %s in one chunk", key, b.QueryID, b.BatchID, b.Chunks, queryID)
		}
		for _, row := range b.Rows {
			batches[b.BatchID] = append(batches[b.BatchID], row.Value)
		}
		if len(b.Rows) == 0 {
			batches[b.BatchID] = nil
		}
	}
	return r.deliveries, r.refused, batches, nil
}

// noSecretValues checks that none of the values (by what they are), nor their base64 form as
// a Secret's data holds them, appears where a user or another tenant can read it without
// reading the Secret: the query (spec and status), the ConfigMap, the workload and its pods,
// the namespace's events, the engine's log and the controller's log.
func (tn *tenant) noSecretValues(query string, values map[string]string) {
	tn.t.Helper()
	places := map[string][]string{
		"the query and its status":   {"-n", tn.ns, "get", "streamingquery", query, "-o", "yaml"},
		"the ConfigMaps":             {"-n", tn.ns, "get", "configmaps", "-o", "yaml"},
		"the workload and its pods":  {"-n", tn.ns, "get", "deployments,replicasets,jobs,pods", "-o", "yaml"},
		"the events":                 {"-n", tn.ns, "get", "events", "-o", "yaml"},
		"the engine's log":           {"-n", tn.ns, "logs", "-l", controller.LabelQuery + "=" + query, "--all-containers", "--tail=-1"},
		"the controller's log":       {"-n", controllerNamespace, "logs", "deployment/" + controllerDeployment, "--tail=-1"},
		"the CheckpointStore status": {"get", "checkpointstore", tn.store, "-o", "yaml"},
	}
	for where, args := range places {
		out, err := tn.tryKubectl(nil, args...)
		if err != nil {
			tn.t.Fatalf("read %s: %v", where, err)
		}
		if where == "the engine's log" && !strings.Contains(string(out), "Engine started") {
			tn.t.Fatalf("the engine's log has no start line: is its pod gone? kubectl %s:\n%s", strings.Join(args, " "), out)
		}
		for what, v := range values {
			if strings.Contains(string(out), v) || strings.Contains(string(out), base64.StdEncoding.EncodeToString([]byte(v))) {
				tn.t.Errorf("%s is in %s (kubectl %s)", what, where, strings.Join(args, " "))
			}
		}
	}
}

// randomValue is a secret value no other text contains by chance.
func randomValue(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "s3cr3t-" + hex.EncodeToString(b)
}

// testCA is a certificate authority made for one test.
type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	pool    *x509.CertPool
}

// pemPair is a certificate and its key, PEM-encoded as `kubectl create secret tls` takes them.
type pemPair struct{ cert, key []byte }

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "lockstep e2e CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a certificate for name: a server's for ip when ip is set, else a client's.
func (ca *testCA) issue(t *testing.T, name string, ip net.IP) (tls.Certificate, pemPair) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := pemPair{
		cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
	pair, err := tls.X509KeyPair(p.cert, p.key)
	if err != nil {
		t.Fatal(err)
	}
	return pair, p
}

// pemBody is the base64 body of a PEM block on one line: a text that holds the key holds
// its lines.
func pemBody(data []byte) string {
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return lines[1] // the first line of the body: the header is not secret
}

// secureKafka starts an Apache Kafka broker of the test's own on host that takes only
// TLS connections presenting a client certificate of ca, and only SASL-authenticated users
// (each with SCRAM-SHA-256 and SCRAM-SHA-512), with a topic orders, and returns the address
// of that listener. Its PLAINTEXT listener stays on loopback, for the admin client here.
func secureKafka(t *testing.T, host string, ca *testCA, cert tls.Certificate, users ...testenv.KafkaCredentials) string {
	t.Helper()
	b := testenv.KafkaProcessWith(t, testenv.KafkaOptions{Host: host, Users: users, Cert: &cert,
		ClientCAs: ca.certPEM, SecureOnly: true})
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatalf("create topic orders on the TLS and SASL broker: %v", err)
	}
	return b.SASLAddr
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
