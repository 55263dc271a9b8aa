package kafka_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/engine/kafka"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestSASLAndTLS reads from and writes to a broker that requires SASL over
// TLS, with each mechanism; wrong credentials and an untrusted certificate
// fail clearly.
func TestSASLAndTLS(t *testing.T) {
	for _, mech := range []v1.SASLMechanism{v1.SASLPlain, v1.SASLScramSHA256, v1.SASLScramSHA512} {
		t.Run(string(mech), func(t *testing.T) {
			kafkaSrv := testenv.KafkaShared(t)
			brokers, caFile := []string{kafkaSrv.SASLAddr}, kafkaSrv.CAFile
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM([]byte(readFile(t, caFile)))
			var auth kgo.Opt
			switch mech {
			case v1.SASLPlain:
				auth = kgo.SASL(plain.Auth{User: testenv.KafkaUser, Pass: testenv.KafkaPassword}.AsMechanism())
			case v1.SASLScramSHA256:
				auth = kgo.SASL(scram.Auth{User: testenv.KafkaUser, Pass: testenv.KafkaPassword}.AsSha256Mechanism())
			default:
				auth = kgo.SASL(scram.Auth{User: testenv.KafkaUser, Pass: testenv.KafkaPassword}.AsSha512Mechanism())
			}
			cl := client(t, brokers, auth, kgo.DialTLSConfig(&tls.Config{RootCAs: pool}), kgo.AllowAutoTopicCreation())
			if err := cl.ProduceSync(testContext(t), jsonRecords("t", 0, 0, 3)...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if _, err := kadm.NewClient(cl).CreateTopic(testContext(t), 1, -1, nil, "out"); err != nil {
				t.Fatal(err)
			}
			env := map[string]string{"KAFKA_USER": testenv.KafkaUser, "KAFKA_PASS": testenv.KafkaPassword}
			getenv := func(k string) string { return env[k] }
			spec := kafkaSpec(brokers, "t")
			spec.Kafka.SASL = &v1.KafkaSASL{Mechanism: mech, UsernameEnv: "KAFKA_USER", PasswordEnv: "KAFKA_PASS"}
			spec.Kafka.TLS = &v1.KafkaTLS{CAFile: caFile}
			src, err := kafka.NewSource(testContext(t), spec, engine.SourceEnv{
				Name: spec.Name, QueryID: "q1", Store: sourceStore(t, t.TempDir()), Logger: testLogger(t), Getenv: getenv,
			})
			if err != nil {
				t.Fatalf("new source through SASL and TLS: %v", err)
			}
			s := src.(*kafka.Source)
			defer s.Close()
			if got := ids(read(t, s, 0, nil, plan(t, s, 0, nil, true).End)); len(got) != 3 {
				t.Fatalf("read %v through SASL and TLS", got)
			}

			sinkSpec := &v1.Sink{Kafka: &v1.KafkaSink{BootstrapServers: brokers, Topic: "out", ExactlyOnce: true,
				SASL: spec.Kafka.SASL, TLS: spec.Kafka.TLS}}
			sk, err := kafka.NewSink(testContext(t), sinkSpec,
				engine.SinkEnv{QueryID: "q1", Columns: enginetest.SinkColumns, Logger: testLogger(t), Getenv: getenv})
			if err != nil {
				t.Fatal(err)
			}
			defer sk.(*kafka.Sink).Close()
			if err := sk.Write(testContext(t), &engine.Batch{QueryID: "q1", Columns: enginetest.SinkColumns, Time: time.Now(),
				Rows: []engine.Row{{"a", int64(1)}}}); err != nil {
				t.Fatalf("write through SASL and TLS: %v", err)
			}

			env["KAFKA_PASS"] = "wrong"
			_, err = kafka.SourceWith(kafka.WithConnectTimeout(5*time.Second))(testContext(t), spec,
				engine.SourceEnv{Name: "in", Store: sourceStore(t, t.TempDir()), Logger: testLogger(t), Getenv: getenv})
			// Apache Kafka answers SASL_AUTHENTICATION_FAILED (kfake closed the connection).
			if !errors.Is(err, kerr.SaslAuthenticationFailed) || !contains(err.Error(), "refused the credentials") {
				t.Errorf("wrong password: %v, want a clear error", err)
			}
		})
	}
	t.Run("untrusted certificate", func(t *testing.T) {
		brokers := []string{testenv.KafkaShared(t).TLSAddr}
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
		_, err := kafka.NewSource(testContext(t), spec,
			engine.SourceEnv{Name: "in", Store: sourceStore(t, t.TempDir()), Getenv: func(string) string { return "" }})
		for _, want := range []string{"$NOPE_USER", "missing.crt"} {
			if err == nil || !contains(err.Error(), want) {
				t.Errorf("start: %v, want it to name %s", err, want)
			}
		}
	})
}
