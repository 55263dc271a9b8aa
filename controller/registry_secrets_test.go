package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/controller"
)

// Values of the Schema Registry's Secrets: none may appear outside the Secrets.
var registrySecretValues = []string{"registry-pa55word", "registry-ca-pem-s3cr3t"}

// avroQuery reads Avro orders and writes Avro, both through one Schema Registry whose
// credentials and CA come from Secrets.
func (f *fixture) avroQuery(name string) *querytest.Query {
	registry := func() *v1.SchemaRegistry {
		return &v1.SchemaRegistry{URL: "https://registry:8443/apis/ccompat/v6", SecretName: "registry-user", CASecretName: "registry-ca"}
	}
	return querytest.Make(name, f.ns).
		KafkaSource("orders", "kafka:9093", "orders", querytest.Col("id", v1.TypeString)).
		EditSource("orders", func(s *v1.Source) {
			s.Kafka.Format = v1.KafkaAvro
			s.Kafka.SchemaRegistry = registry()
		}).
		KafkaSink("kafka:9093", "orders-copy").
		Edit(func(s *v1.StreamingQuerySpec) {
			s.Sink.Kafka.Format = v1.KafkaAvro
			s.Sink.Kafka.SchemaRegistry = registry()
		}).
		CheckpointStore(f.store.Name)
}

// TestRegistrySecretsReachTheEngine: a query whose schemaRegistry names Secrets that do not
// exist yet is admitted with a warning naming the field, waits for them (Pending,
// SecretMissing, no engine), and once they are created its engine gets the credentials as
// variables and the CA mounted (one of each, though source and sink name them), and it is
// Ready when its pod is. No value of theirs appears in the ConfigMap, the workload, the
// query or an event.
func TestRegistrySecretsReachTheEngine(t *testing.T) {
	// Resynced hourly, the query can only see its Secrets created through the watch.
	f, w := webhookFixture(t, controller.WithResync(time.Hour))
	f.create(f.avroQuery("orders").Obj())
	if got := strings.Join(w.take(), "\n"); !strings.Contains(got, "spec.sources[0].kafka.schemaRegistry.secretName") || !strings.Contains(got, "registry-user") {
		t.Errorf("admission warnings %q, want one naming the missing Secret and its field", got)
	}
	q := f.eventuallyCondition("orders", v1.ConditionReady, metav1.ConditionFalse, v1.ReasonSecretMissing)
	if msg := condition(q, v1.ConditionReady).Message; q.Status.Phase != v1.PhasePending || !strings.Contains(msg, "Secret "+f.ns+"/registry-user") {
		t.Errorf("phase %s, Ready message %q; want Pending, naming the Secret", q.Status.Phase, msg)
	}
	err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: controller.EngineName("orders")}, &appsv1.Deployment{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("get the engine's Deployment while its Secrets are missing = %v, want NotFound", err)
	}

	f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "registry-user", Namespace: f.ns},
		StringData: map[string]string{controller.KeySASLUsername: "lockstep", controller.KeySASLPassword: registrySecretValues[0]}})
	eventually(t, "the query waits for the CA's Secret", func() error {
		if msg := condition(f.get("orders"), v1.ConditionReady).Message; !strings.Contains(msg, "Secret "+f.ns+"/registry-ca, named by spec.sources[0].kafka.schemaRegistry.caSecretName") {
			return fmt.Errorf("Ready message %q", msg)
		}
		return nil
	})
	f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "registry-ca", Namespace: f.ns},
		StringData: map[string]string{controller.KeyCA: registrySecretValues[1]}})

	cm, d := f.engine("orders")
	c := d.Spec.Template.Spec.Containers[0]
	refs := secretRefs(c)
	for name, want := range map[string]string{
		v1.DefaultSchemaRegistryUsernameEnv: "registry-user/username",
		v1.DefaultSchemaRegistryPasswordEnv: "registry-user/password",
	} {
		if refs[name] != want {
			t.Errorf("$%s from %q, want %q", name, refs[name], want)
		}
	}
	mounts := map[string]string{}
	vols := map[string]string{}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			vols[v.Name] = v.Secret.SecretName
		}
	}
	for _, m := range c.VolumeMounts {
		if s, ok := vols[m.Name]; ok {
			mounts[m.MountPath] = s
		}
	}
	if diff := cmp.Diff(map[string]string{controller.SecretsMountPath + "/registry-ca": "registry-ca"}, mounts); diff != "" {
		t.Errorf("Secret mounts (-want +got):\n%s", diff)
	}
	engineQuery, err := v1.ParseQuery([]byte(cm.Data[controller.QueryKey]))
	if err != nil {
		t.Fatal(err)
	}
	wantCA := controller.SecretsMountPath + "/registry-ca/ca.crt"
	if got := engineQuery.Spec.Sources[0].Kafka.SchemaRegistry.CAFile; got != wantCA {
		t.Errorf("the engine's source schemaRegistry.caFile = %q, want %q", got, wantCA)
	}
	if got := engineQuery.Spec.Sink.Kafka.SchemaRegistry.CAFile; got != wantCA {
		t.Errorf("the engine's sink schemaRegistry.caFile = %q, want %q", got, wantCA)
	}

	f.runPod(d)
	q = f.eventuallyCondition("orders", v1.ConditionReady, metav1.ConditionTrue, v1.ReasonRunning)
	if q.Spec.Sources[0].Kafka.SchemaRegistry.CAFile != "" {
		t.Errorf("the stored query's caFile = %q: the controller's mount path leaked into the spec", q.Spec.Sources[0].Kafka.SchemaRegistry.CAFile)
	}

	var evs eventsv1.EventList
	if err := f.c.List(context.Background(), &evs, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	for what, obj := range map[string]any{"ConfigMap": cm, "Deployment": d, "StreamingQuery": q, "events": evs} {
		text, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range registrySecretValues {
			if strings.Contains(string(text), v) {
				t.Errorf("the %s holds the Secret value %q", what, v)
			}
		}
	}
}

// TestAdmissionRefusesRegistryCAFileWithSecret: caFile and caSecretName together cannot both
// hold, as for Kafka's TLS.
func TestAdmissionRefusesRegistryCAFileWithSecret(t *testing.T) {
	f, _ := webhookFixture(t)
	q := f.avroQuery("ca").Edit(func(s *v1.StreamingQuerySpec) { s.Sink.Kafka.SchemaRegistry.CAFile = "/etc/ca.pem" }).Obj()
	err := f.c.Create(context.Background(), q)
	if field := "spec.sink.kafka.schemaRegistry.caSecretName"; !apierrors.IsInvalid(err) || !strings.Contains(statusCauses(err), field+":") {
		t.Errorf("create = %v (causes %q), want Invalid on %s", err, statusCauses(err), field)
	}
}
