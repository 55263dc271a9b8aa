package kafka_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/kafka"
)

// TestRegistrySecretsAsThePodHasThem: the engine reaches the registry over TLS with basic
// authentication from what the controller gives its pod for schemaRegistry's secretName and
// caSecretName: the credentials in the variables usernameEnv and passwordEnv name, the CA as
// ca.crt in the Secret's mounted folder, which the engine's spec names in caFile. Without the
// credentials the sink fails at start, naming the registry's refusal and not the password.
func TestRegistrySecretsAsThePodHasThem(t *testing.T) {
	topic := "avro-registry-secrets"
	brokers, reg := registryTopic(t, topic)

	// The Secret registry-ca, mounted as the controller mounts it.
	mounted := filepath.Join(t.TempDir(), "registry-ca")
	if err := os.MkdirAll(mounted, 0o755); err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(reg.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mounted, "ca.crt"), ca, 0o440); err != nil {
		t.Fatal(err)
	}
	registry := &v1.SchemaRegistry{URL: reg.TLSURL, SecretName: "registry-user", CASecretName: "registry-ca",
		UsernameEnv: "ORDERS_REGISTRY_USER", PasswordEnv: "ORDERS_REGISTRY_PASSWORD", CAFile: filepath.Join(mounted, "ca.crt")}
	env := func(k string) string {
		switch k {
		case "ORDERS_REGISTRY_USER":
			return reg.User
		case "ORDERS_REGISTRY_PASSWORD":
			return reg.Password
		}
		return ""
	}

	cols := v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "n", Type: v1.TypeLong}}
	rows := []engine.Row{{"a", int64(1)}, {"b", int64(2)}}
	sinkSpec := &v1.Sink{Kafka: &v1.KafkaSink{BootstrapServers: brokers, Topic: topic, Format: v1.KafkaAvro, SchemaRegistry: registry}}
	sinkEnv := engine.SinkEnv{QueryID: "q1", Columns: cols, OutputMode: v1.OutputAppend, Logger: testLogger(t)}

	// Without the variables: refused by the registry, at start.
	_, err = kafka.SinkWith(kafka.WithGetenv(func(string) string { return "" }))(testContext(t), sinkSpec, sinkEnv)
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "$ORDERS_REGISTRY_USER is unset") {
		t.Errorf("new sink without credentials = %v, want the registry's 401 naming the unset variable", err)
	}
	// A wrong password: refused, and the error does not quote it.
	wrong := "wr0ng-registry-pa55word"
	_, err = kafka.SinkWith(kafka.WithGetenv(func(k string) string {
		if k == "ORDERS_REGISTRY_PASSWORD" {
			return wrong
		}
		return env(k)
	}))(testContext(t), sinkSpec, sinkEnv)
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "$ORDERS_REGISTRY_PASSWORD") || strings.Contains(err.Error(), wrong) {
		t.Errorf("new sink with a wrong password = %v, want the registry's 401 naming the variable, not quoting the password", err)
	}

	writeRows(t, env, sinkSpec, cols, rows)

	spec := kafkaSpec(brokers, topic)
	spec.Kafka.Format = v1.KafkaAvro
	spec.Kafka.SchemaRegistry = registry
	spec.Schema = &v1.Schema{Columns: cols}
	got, _ := readColumns(t, newSource(t, spec, t.TempDir(), kafka.WithGetenv(env)), len(cols))
	if diff := cmp.Diff(rows, got); diff != "" {
		t.Fatalf("rows read back (-written +read):\n%s", diff)
	}
}
