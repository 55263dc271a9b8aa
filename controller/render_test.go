package controller_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/controller"
	"github.com/lockstep-dev/lockstep/engine/webhook"
)

func renderStore() *v1.CheckpointStore {
	return &v1.CheckpointStore{Spec: v1.CheckpointStoreSpec{
		S3:                    v1.S3Store{Endpoint: "http://s3:9000", Bucket: "checkpoints"},
		CredentialsSecretName: "s3-credentials",
	}}
}

// securedQuery reads Kafka with SASL and TLS from Secrets and writes to a webhook whose
// headers come from a Secret.
func securedQuery() *querytest.Query {
	return querytest.Make("orders", "payments").
		KafkaSource("orders", "kafka:9093", "orders", querytest.Col("id", v1.TypeString)).
		EditSource("orders", func(s *v1.Source) {
			s.Kafka.SASL = &v1.KafkaSASL{Mechanism: v1.SASLScramSHA512, SecretName: "kafka-user"}
			s.Kafka.TLS = &v1.KafkaTLS{CASecretName: "kafka-ca", ClientSecretName: "kafka-client"}
		}).
		WebhookSink("https://hooks.example.com/orders").
		Edit(func(s *v1.StreamingQuerySpec) { s.Sink.Webhook.HeadersSecretName = "hook-auth" }).
		Checkpoint("s3://checkpoints/payments/orders").UID("u-1").Generation(1)
}

func render(t *testing.T, q *v1.StreamingQuery) (*corev1.ConfigMap, corev1.PodTemplateSpec) {
	t.Helper()
	cm, err := controller.RenderConfigMap(q, renderStore(), controller.EngineSettings{})
	if err != nil {
		t.Fatal(err)
	}
	return cm, controller.RenderPodTemplate(q, renderStore(), cm, controller.EngineSettings{Image: "ghcr.io/lockstep-dev/lockstep:v1.0.0"})
}

func TestRenderWiresSecrets(t *testing.T) {
	q := securedQuery().Obj()
	cm, pod := render(t, q)
	c := pod.Spec.Containers[0]

	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	fromSecret := func(name string) (secret, key string, optional bool) {
		e, ok := env[name]
		if !ok || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.Value != "" {
			t.Errorf("$%s = %+v, want it from a Secret key", name, e)
			return "", "", false
		}
		r := e.ValueFrom.SecretKeyRef
		return r.Name, r.Key, ptr.Deref(r.Optional, false)
	}
	type ref struct {
		Secret, Key string
		Optional    bool
	}
	for name, want := range map[string]ref{
		v1.DefaultKafkaUsernameEnv:    {"kafka-user", controller.KeySASLUsername, false},
		v1.DefaultKafkaPasswordEnv:    {"kafka-user", controller.KeySASLPassword, false},
		controller.EnvAccessKeyID:     {"s3-credentials", controller.EnvAccessKeyID, false},
		controller.EnvSecretAccessKey: {"s3-credentials", controller.EnvSecretAccessKey, false},
		controller.EnvSessionToken:    {"s3-credentials", controller.EnvSessionToken, true},
	} {
		s, k, o := fromSecret(name)
		if diff := cmp.Diff(want, ref{s, k, o}); diff != "" {
			t.Errorf("$%s (-want +got):\n%s", name, diff)
		}
	}

	// Each mounted Secret has its folder, and the engine's spec points at its files.
	mounts := map[string]string{} // path → Secret
	vols := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil {
			vols[v.Name] = v.Secret.SecretName
		}
	}
	for _, m := range c.VolumeMounts {
		if s, ok := vols[m.Name]; ok {
			if !m.ReadOnly {
				t.Errorf("mount %s is writable", m.MountPath)
			}
			mounts[m.MountPath] = s
		}
	}
	want := map[string]string{
		controller.SecretsMountPath + "/kafka-ca":     "kafka-ca",
		controller.SecretsMountPath + "/kafka-client": "kafka-client",
		controller.WebhookHeadersDir:                  "hook-auth",
	}
	if diff := cmp.Diff(want, mounts); diff != "" {
		t.Errorf("Secret mounts (-want +got):\n%s", diff)
	}
	if !strings.Contains(strings.Join(c.Args, " "), "--webhook-headers-dir="+controller.WebhookHeadersDir) {
		t.Errorf("args %v do not tell the engine where the headers are", c.Args)
	}
	if controller.WebhookHeadersDir != webhook.DefaultHeadersDir {
		t.Errorf("WebhookHeadersDir = %s, the engine's default is %s", controller.WebhookHeadersDir, webhook.DefaultHeadersDir)
	}
	got, err := v1.ParseQuery([]byte(cm.Data[controller.QueryKey]))
	if err != nil {
		t.Fatal(err)
	}
	tls := got.Spec.Sources[0].Kafka.TLS
	wantTLS := v1.KafkaTLS{
		CASecretName: "kafka-ca", CAFile: controller.SecretsMountPath + "/kafka-ca/ca.crt",
		ClientSecretName: "kafka-client",
		CertFile:         controller.SecretsMountPath + "/kafka-client/tls.crt", KeyFile: controller.SecretsMountPath + "/kafka-client/tls.key",
	}
	if diff := cmp.Diff(wantTLS, *tls); diff != "" {
		t.Errorf("engine's tls (-want +got):\n%s", diff)
	}
	if g := pod.Spec.SecurityContext.FSGroup; g == nil {
		t.Error("no fsGroup: the engine user could not read the Secret files (mode 0440)")
	}
	// The user's query is not changed by rendering.
	if q.Spec.Sources[0].Kafka.TLS.CAFile != "" {
		t.Errorf("RenderConfigMap changed the query's caFile to %q", q.Spec.Sources[0].Kafka.TLS.CAFile)
	}
}

func TestRenderSharesOneSecretOnce(t *testing.T) {
	// The source and the sink use the same user and CA: one volume, one set of variables.
	q := querytest.Make("copy", "payments").
		KafkaSource("orders", "kafka:9093", "orders", querytest.Col("id", v1.TypeString)).
		EditSource("orders", func(s *v1.Source) {
			s.Kafka.SASL = &v1.KafkaSASL{Mechanism: v1.SASLPlain, SecretName: "kafka-user"}
			s.Kafka.TLS = &v1.KafkaTLS{CASecretName: "kafka-ca"}
		}).
		KafkaSink("kafka:9093", "copies").
		Edit(func(s *v1.StreamingQuerySpec) {
			s.Sink.Kafka.SASL = &v1.KafkaSASL{Mechanism: v1.SASLPlain, SecretName: "kafka-user"}
			s.Sink.Kafka.TLS = &v1.KafkaTLS{CASecretName: "kafka-ca"}
		}).Checkpoint("s3://checkpoints/payments/copy").Obj()
	if errs := controller.ValidateSecretRefs(q); len(errs) > 0 {
		t.Fatalf("ValidateSecretRefs = %v, want none", errs)
	}
	_, pod := render(t, q)
	names := map[string]int{}
	for _, e := range pod.Spec.Containers[0].Env {
		names[e.Name]++
	}
	secretVols := 0
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil {
			secretVols++
		}
	}
	if names[v1.DefaultKafkaUsernameEnv] != 1 || secretVols != 1 {
		t.Errorf("variables %v, %d Secret volumes; want each once", names, secretVols)
	}
}

func TestValidateSecretRefs(t *testing.T) {
	base := func() *querytest.Query {
		return querytest.Make("q", "ns").
			KafkaSource("a", "kafka:9093", "a", querytest.Col("id", v1.TypeString)).
			KafkaSource("b", "kafka:9093", "b", querytest.Col("id", v1.TypeString)).
			ConsoleSink()
	}
	sasl := func(source, secret, userEnv string) func(*v1.Source) {
		return func(s *v1.Source) {
			if s.Name == source {
				s.Kafka.SASL = &v1.KafkaSASL{Mechanism: v1.SASLPlain, SecretName: secret, UsernameEnv: userEnv, PasswordEnv: userEnv + "_PASSWORD"}
			}
		}
	}
	for _, tc := range []struct {
		name string
		q    *v1.StreamingQuery
		want []string // fields of the errors
	}{
		{"none", base().Obj(), nil},
		{"two users, own variables", base().EditSource("a", sasl("a", "user-a", "A_USER")).EditSource("b", sasl("b", "user-b", "B_USER")).Obj(), nil},
		{"two users, one variable", base().EditSource("a", sasl("a", "user-a", "USER")).EditSource("b", sasl("b", "user-b", "USER")).Obj(),
			[]string{"spec.sources[1].kafka.sasl.secretName", "spec.sources[1].kafka.sasl.secretName"}},
		{"the controller's variable", base().EditSource("a", sasl("a", "user-a", controller.EnvAccessKeyID)).Obj(),
			[]string{"spec.sources[0].kafka.sasl.secretName"}},
		{"caFile and caSecretName", base().EditSource("a", func(s *v1.Source) {
			s.Kafka.TLS = &v1.KafkaTLS{CAFile: "/etc/ca.pem", CASecretName: "ca"}
		}).Obj(), []string{"spec.sources[0].kafka.tls.caSecretName"}},
		{"two registries, one variable", base().EditSource("a", func(s *v1.Source) {
			s.Kafka.Format, s.Kafka.SchemaRegistry = v1.KafkaAvro, &v1.SchemaRegistry{URL: "https://r:8081", SecretName: "registry-a"}
		}).EditSource("b", func(s *v1.Source) {
			s.Kafka.Format, s.Kafka.SchemaRegistry = v1.KafkaAvro, &v1.SchemaRegistry{URL: "https://r:8081", SecretName: "registry-b"}
		}).Obj(), []string{"spec.sources[1].kafka.schemaRegistry.secretName", "spec.sources[1].kafka.schemaRegistry.secretName"}},
		{"registry caFile and caSecretName", base().EditSource("a", func(s *v1.Source) {
			s.Kafka.Format, s.Kafka.SchemaRegistry = v1.KafkaAvro, &v1.SchemaRegistry{URL: "https://r:8081", CAFile: "/etc/ca.pem", CASecretName: "ca"}
		}).Obj(), []string{"spec.sources[0].kafka.schemaRegistry.caSecretName"}},
		{"certFile and clientSecretName", base().EditSource("b", func(s *v1.Source) {
			s.Kafka.TLS = &v1.KafkaTLS{CertFile: "/etc/c.pem", KeyFile: "/etc/k.pem", ClientSecretName: "client"}
		}).Obj(), []string{"spec.sources[1].kafka.tls.clientSecretName"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range controller.ValidateSecretRefs(tc.q) {
				got = append(got, e.Field)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ValidateSecretRefs fields (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderEngineSettings(t *testing.T) {
	q := securedQuery().Edit(func(s *v1.StreamingQuerySpec) {
		s.Engine = v1.EngineSpec{
			ServiceAccountName: "orders-engine",
			NodeSelector:       map[string]string{"pool": "streaming"},
			Tolerations:        []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "streaming", Effect: corev1.TaintEffectNoSchedule}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}},
			}}},
			PriorityClassName: "streaming-high",
			ImagePullSecrets:  []corev1.LocalObjectReference{{Name: "registry"}},
			Labels:            map[string]string{"team": "payments", controller.LabelQuery: "not-this"},
			Annotations:       map[string]string{"prometheus.io/scrape": "false"},
			EnvFrom:           []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "extra"}}}},
		}
		s.Resources.Limits = map[string]resource.Quantity{"memory": resource.MustParse("1Gi")}
	}).Obj()
	_, pod := render(t, q)
	ps := pod.Spec
	if ps.ServiceAccountName != "orders-engine" || ps.PriorityClassName != "streaming-high" || ps.NodeSelector["pool"] != "streaming" ||
		len(ps.Tolerations) != 1 || ps.Affinity == nil || ps.Affinity.NodeAffinity == nil || len(ps.ImagePullSecrets) != 1 {
		t.Errorf("pod spec lacks the engine settings: %+v", ps)
	}
	if ptr.Deref(ps.AutomountServiceAccountToken, true) {
		t.Error("the API token is mounted")
	}
	if pod.Labels["team"] != "payments" || pod.Labels[controller.LabelQuery] != "orders" || pod.Annotations["prometheus.io/scrape"] != "false" {
		t.Errorf("pod metadata = %v / %v, want the spec's labels and annotations under the controller's", pod.Labels, pod.Annotations)
	}
	c := ps.Containers[0]
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef.Name != "extra" {
		t.Errorf("envFrom = %+v", c.EnvFrom)
	}
	// memory is limited (Kubernetes requests the limit), cpu gets the default request.
	if _, ok := c.Resources.Requests[corev1.ResourceMemory]; ok {
		t.Errorf("memory request %v added under a limit", c.Resources.Requests.Memory())
	}
	if cpu := c.Resources.Requests.Cpu(); cpu.IsZero() {
		t.Error("no default cpu request")
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("liveness probe = %+v, want /healthz", c.LivenessProbe)
	}
	// A restart by the liveness probe does not wait the pod's grace period for a batch
	// boundary that a stuck engine will not reach.
	if g := c.LivenessProbe.TerminationGracePeriodSeconds; g == nil || *g >= *ps.TerminationGracePeriodSeconds {
		t.Errorf("liveness grace period = %v, want one shorter than the pod's %d s", g, *ps.TerminationGracePeriodSeconds)
	}
}

func TestRenderDefaultRequests(t *testing.T) {
	_, pod := render(t, securedQuery().Obj())
	r := pod.Spec.Containers[0].Resources
	if r.Requests.Cpu().IsZero() || r.Requests.Memory().IsZero() || len(r.Limits) != 0 {
		t.Errorf("resources = %+v, want default cpu and memory requests and no limit", r)
	}
}

func TestRenderJob(t *testing.T) {
	for _, tc := range []struct {
		name string
		q    *querytest.Query
	}{
		{"once", securedQuery().Once()},
		{"availableNow", securedQuery().AvailableNow()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q.Suspend(true).Obj()
			cm, err := controller.RenderConfigMap(q, renderStore(), controller.EngineSettings{})
			if err != nil {
				t.Fatal(err)
			}
			j := controller.RenderJob(q, renderStore(), cm, controller.EngineSettings{Image: "img:v1"})
			if j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
				t.Errorf("restartPolicy = %s, want OnFailure: a pod that exited 0 must not run again", j.Spec.Template.Spec.RestartPolicy)
			}
			if !ptr.Deref(j.Spec.Suspend, false) || ptr.Deref(j.Spec.Completions, 0) != 1 || ptr.Deref(j.Spec.Parallelism, 0) != 1 {
				t.Errorf("job spec = %+v, want suspended, one completion, one pod", j.Spec)
			}
			if j.Name != controller.EngineName("orders") || j.Spec.Template.Annotations[controller.AnnotationSpecHash] != controller.SpecHash(cm) {
				t.Errorf("job %s template annotations %v", j.Name, j.Spec.Template.Annotations)
			}
		})
	}
}

func TestDefaultEngineImage(t *testing.T) {
	for _, tc := range []struct {
		version, want string
		ok            bool
	}{
		{"v1.2.3", "ghcr.io/lockstep-dev/lockstep:v1.2.3", true},
		{"v1.2.3-rc.1", "ghcr.io/lockstep-dev/lockstep:v1.2.3-rc.1", true},
		{"(devel)", "", false},
		{"devel+1a347cf", "", false},
		{"v0.0.0-20260726120000-1a347cf4f2a1+dirty", "", false},
		{"v0.0.0-20260726120000-1a347cf4f2a1", "", false},
		{"v1.2.4-0.20260726120000-1a347cf4f2a1", "", false},
	} {
		got, err := controller.DefaultEngineImage(tc.version)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("DefaultEngineImage(%q) = %q, %v; want %q, ok %v", tc.version, got, err, tc.want, tc.ok)
		}
	}
}

// A files source and a delta sink on their own S3 servers get their keys from their own
// Secrets, under their prefixes, never mixed with the checkpoint's.
func TestRenderWiresS3ConnectionSecrets(t *testing.T) {
	q := querytest.Make("lake", "payments").
		FilesSource("orders", "s3://landing/orders", v1.FormatJSON, querytest.Col("id", v1.TypeString)).
		EditSource("orders", func(s *v1.Source) {
			s.Files.S3 = &v1.S3Connection{Endpoint: "https://s3.eu-west-1.amazonaws.com", SecretName: "landing-keys"}
		}).
		Join(v1.Join{Name: "customers", Keys: querytest.Keys("id", "id"), RightPrefix: "c_", Static: &v1.StaticSide{
			Delta:  &v1.StaticDelta{Path: "s3://ref/customers", S3: &v1.S3Connection{SecretName: "ref-keys"}},
			Schema: &v1.Schema{Columns: v1.Columns{{Name: "id", Type: v1.TypeString}}},
		}}).
		DeltaSink("s3://lake/orders", "").
		Edit(func(s *v1.StreamingQuerySpec) {
			s.Sink.Delta.PartitionColumns = nil
			s.Sink.Delta.S3 = &v1.S3Connection{SecretName: "lake-keys", CredentialsEnvPrefix: "LAKE_"}
		}).Checkpoint("s3://checkpoints/payments/lake").Obj()
	if errs := controller.ValidateSecretRefs(q); len(errs) > 0 {
		t.Fatalf("ValidateSecretRefs = %v, want none", errs)
	}
	_, pod := render(t, q)
	got := secretRefs(pod.Spec.Containers[0])
	for name, want := range map[string]string{
		"LOCKSTEP_ORDERS_AWS_ACCESS_KEY_ID":     "landing-keys/AWS_ACCESS_KEY_ID",
		"LOCKSTEP_ORDERS_AWS_SECRET_ACCESS_KEY": "landing-keys/AWS_SECRET_ACCESS_KEY",
		"LOCKSTEP_ORDERS_AWS_SESSION_TOKEN":     "landing-keys/AWS_SESSION_TOKEN",
		"LAKE_AWS_ACCESS_KEY_ID":                "lake-keys/AWS_ACCESS_KEY_ID",
		"LOCKSTEP_CUSTOMERS_AWS_ACCESS_KEY_ID":  "ref-keys/AWS_ACCESS_KEY_ID",
		"LAKE_AWS_SECRET_ACCESS_KEY":            "lake-keys/AWS_SECRET_ACCESS_KEY",
		controller.EnvAccessKeyID:               "s3-credentials/AWS_ACCESS_KEY_ID",
	} {
		if got[name] != want {
			t.Errorf("$%s from %q, want %q", name, got[name], want)
		}
	}
}

// A postgres sink's connection Secret reaches the engine as the DSN variable the sink reads,
// by reference.
func TestRenderWiresPostgresConnectionSecret(t *testing.T) {
	q := querytest.Make("totals", "payments").
		RateSource("ticks", 1).
		Sink(v1.Sink{Postgres: &v1.PostgresSink{Connection: v1.PostgresConnection{SecretName: "orders-db"}, Table: "totals"}}).
		Checkpoint("s3://checkpoints/payments/totals").Obj()
	if errs := controller.ValidateSecretRefs(q); len(errs) > 0 {
		t.Fatalf("ValidateSecretRefs = %v, want none", errs)
	}
	_, pod := render(t, q)
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name != v1.PostgresDSNEnv {
			continue
		}
		if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
			e.ValueFrom.SecretKeyRef.Name != "orders-db" || e.ValueFrom.SecretKeyRef.Key != v1.PostgresDSNSecretKey {
			t.Errorf("$%s = %+v, want key %s of Secret orders-db", e.Name, e, v1.PostgresDSNSecretKey)
		}
		return
	}
	t.Errorf("no $%s in the engine's environment", v1.PostgresDSNEnv)
}

// secretRefs maps each environment variable of c taken from a Secret to the Secret's
// name/key.
func secretRefs(c corev1.Container) map[string]string {
	refs := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			refs[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	return refs
}
