package kafka_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/engine/kafka"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// testCA writes a CA and a server certificate for 127.0.0.1 into dir and
// returns the server's TLS config and the CA file.
func testCA(t *testing.T, dir string) (*tls.Config, string) {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, srvKey := key(), key()
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lockstep test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srv := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "broker"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames: []string{"broker.test"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}}}, caFile
}

// TestSASLAndTLS reads from and writes to a broker that requires SASL over
// TLS, with each mechanism; wrong credentials and an untrusted certificate
// fail clearly.
func TestSASLAndTLS(t *testing.T) {
	srvTLS, caFile := testCA(t, t.TempDir())
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(readFile(t, caFile)))
	for _, mech := range []v1.SASLMechanism{v1.SASLPlain, v1.SASLScramSHA256, v1.SASLScramSHA512} {
		t.Run(string(mech), func(t *testing.T) {
			brokers := testenv.Kafka(t, kfake.EnableSASL(), kfake.Superuser(string(mech), "alice", "s3cret"), kfake.TLS(srvTLS))
			var auth kgo.Opt
			switch mech {
			case v1.SASLPlain:
				auth = kgo.SASL(plain.Auth{User: "alice", Pass: "s3cret"}.AsMechanism())
			case v1.SASLScramSHA256:
				auth = kgo.SASL(scram.Auth{User: "alice", Pass: "s3cret"}.AsSha256Mechanism())
			default:
				auth = kgo.SASL(scram.Auth{User: "alice", Pass: "s3cret"}.AsSha512Mechanism())
			}
			cl := client(t, brokers, auth, kgo.DialTLSConfig(&tls.Config{RootCAs: pool}), kgo.AllowAutoTopicCreation())
			if err := cl.ProduceSync(testContext(t), jsonRecords("t", 0, 0, 3)...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if _, err := kadm.NewClient(cl).CreateTopic(testContext(t), 1, -1, nil, "out"); err != nil {
				t.Fatal(err)
			}
			env := map[string]string{"KAFKA_USER": "alice", "KAFKA_PASS": "s3cret"}
			getenv := func(k string) string { return env[k] }
			spec := kafkaSpec(brokers, "t")
			spec.Kafka.SASL = &v1.KafkaSASL{Mechanism: mech, UsernameEnv: "KAFKA_USER", PasswordEnv: "KAFKA_PASS"}
			spec.Kafka.TLS = &v1.KafkaTLS{CAFile: caFile}
			s := newSource(t, spec, t.TempDir(), kafka.WithGetenv(getenv))
			if got := ids(read(t, s, 0, nil, plan(t, s, 0, nil, true).End)); len(got) != 3 {
				t.Fatalf("read %v through SASL and TLS", got)
			}

			sinkSpec := &v1.Sink{Kafka: &v1.KafkaSink{BootstrapServers: brokers, Topic: "out", ExactlyOnce: true,
				SASL: spec.Kafka.SASL, TLS: spec.Kafka.TLS}}
			sk, err := kafka.SinkWith(kafka.WithGetenv(getenv))(testContext(t), sinkSpec,
				engine.SinkEnv{QueryID: "q1", Columns: enginetest.SinkColumns, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer sk.(*kafka.Sink).Close()
			if err := sk.Write(testContext(t), &engine.Batch{QueryID: "q1", Columns: enginetest.SinkColumns, Time: time.Now(),
				Rows: []engine.Row{{"a", int64(1)}}}); err != nil {
				t.Fatalf("write through SASL and TLS: %v", err)
			}

			env["KAFKA_PASS"] = "wrong"
			_, err = kafka.SourceWith(kafka.WithGetenv(getenv), kafka.WithConnectTimeout(5*time.Second))(testContext(t), spec,
				engine.SourceEnv{Name: "in", Store: sourceStore(t, t.TempDir()), Logger: testLogger(t)})
			if err == nil || !contains(err.Error(), "SASL mechanism and credentials") {
				t.Errorf("wrong password: %v, want a clear error", err)
			}
		})
	}
	t.Run("untrusted certificate", func(t *testing.T) {
		brokers := testenv.Kafka(t, kfake.TLS(srvTLS))
		spec := kafkaSpec(brokers, "t")
		spec.Kafka.TLS = &v1.KafkaTLS{} // the system's roots do not hold the test CA
		_, err := kafka.SourceWith(kafka.WithConnectTimeout(2*time.Second))(testContext(t), spec,
			engine.SourceEnv{Name: "in", Store: sourceStore(t, t.TempDir()), Logger: testLogger(t)})
		if err == nil || !contains(err.Error(), "certificate") {
			t.Errorf("untrusted broker: %v, want an error about its certificate", err)
		}
	})
	t.Run("missing credentials", func(t *testing.T) {
		spec := kafkaSpec([]string{"127.0.0.1:1"}, "t")
		spec.Kafka.SASL = &v1.KafkaSASL{Mechanism: v1.SASLPlain, UsernameEnv: "NOPE_USER", PasswordEnv: "NOPE_PASS"}
		spec.Kafka.TLS = &v1.KafkaTLS{CAFile: filepath.Join(t.TempDir(), "missing.crt")}
		_, err := kafka.SourceWith(kafka.WithGetenv(func(string) string { return "" }))(testContext(t), spec,
			engine.SourceEnv{Name: "in", Store: sourceStore(t, t.TempDir())})
		for _, want := range []string{"$NOPE_USER", "missing.crt"} {
			if err == nil || !contains(err.Error(), want) {
				t.Errorf("start: %v, want it to name %s", err, want)
			}
		}
	})
}
