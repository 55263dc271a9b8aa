package provider

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestImportRestoresSettings imports a query whose configuration sets wait_for and timeouts,
// which the Kubernetes object does not hold: the provider recorded them in the query's
// AnnotationSettings when it applied it, so the first plan after terraform import is
// "No changes" (issue 15 #13). A query without the annotation (written by kubectl) is
// imported with the schema's defaults.
func TestImportRestoresSettings(t *testing.T) {
	// No webhook and no controller: fakeController reports Running, which wait_for = running
	// waits for (envtest has no kubelet to run an engine).
	c := &lockstepCluster{testCluster: newTestCluster(t, testenv.ControlPlane(t)), s3: testenv.S3(t)}
	c.fakeController(t, "orders", map[string]any{"phase": "Running", "checkpointLocation": "s3://checkpoints/orders"})
	w := newWorkspace(t, c)
	q := baseQuery()
	q.WaitFor = waitRunning
	q.Extra = `  timeouts = { create = "3m", delete = "2m" }`
	w.write(q.hcl())
	w.apply()
	u, err := c.get(t, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := u.GetAnnotations()[AnnotationSettings], `{"wait_for":"running","timeouts":{"create":"3m","delete":"2m"}}`; got != want {
		t.Errorf("annotation %s = %s, want %s", AnnotationSettings, got, want)
	}

	reimport := func() {
		t.Helper()
		w.tf.Must("state", "rm", "-lock=false", address)
		w.tf.Must("import", "-input=false", "-lock=false", address, c.namespace+"/orders")
	}
	t.Run("written by terraform", func(t *testing.T) {
		reimport()
		if out := w.mustPlan(); out != "No changes.\n\n" {
			t.Errorf("first plan after import, with wait_for and timeouts in the configuration:\n%s", out)
		}
	})
	t.Run("written by kubectl", func(t *testing.T) {
		c.edit(t, "orders", func(u *unstructured.Unstructured) {
			a := u.GetAnnotations()
			delete(a, AnnotationSettings)
			u.SetAnnotations(a)
		})
		reimport()
		if got := w.output(t, "wait_for"); got != waitNothing {
			t.Errorf("wait_for after importing a query without the annotation = %q, want the default %q", got, waitNothing)
		}
		// The configuration's settings are then a change of the resource only, not of the query.
		if out := w.mustPlan(); !strings.Contains(out, "Change: "+address+": update") {
			t.Errorf("plan after importing a query without the annotation, with wait_for = running:\n%s", out)
		}
		plain := baseQuery()
		w.write(plain.hcl())
		if out := w.mustPlan(); out != "No changes.\n\n" {
			t.Errorf("plan after importing a query without the annotation, with the defaults:\n%s", out)
		}
	})
}

// importedConfig is the configuration of kubectlQuery, in HCL: the same query, attribute
// for attribute.
const importedConfig = `
locals {
  columns = {
    columns = [
      { name = "order_id", type = "string" },
      { name = "country", type = "string" },
      { name = "amount", type = "double" },
      { name = "ts", type = "timestamp" },
    ]
  }
}

resource "lockstep_streaming_query" "q" {
  name = "revenue"
  sources = [
    {
      name = "orders"
      kafka = {
        bootstrap_servers       = ["kafka-0:9092", "kafka-1:9092"]
        topics                  = ["orders"]
        starting_offsets        = "earliest"
        max_offsets_per_trigger = 10000
        fail_on_data_loss       = false
        format                  = "json"
        sasl                    = { mechanism = "SCRAM-SHA-512", secret_name = "kafka-credentials" }
        tls                     = { ca_secret_name = "kafka-ca", server_name = "kafka.internal" }
      }
      schema           = local.columns
      on_malformed     = "deadLetter"
      dead_letter_path = "s3://dead-letters/orders"
    },
    {
      name = "returns"
      files = {
        path                  = "s3://landing/returns/"
        format                = "csv"
        max_files_per_trigger = 10
        s3                    = { endpoint = "https://minio.storage:9000", region = "eu-west-1", secret_name = "landing-s3" }
      }
      schema       = local.columns
      on_malformed = "skip"
    },
  ]
  transform = [
    { filter = "amount > 0.0" },
    {
      select = [
        { name = "order_id", expr = "order_id" },
        { name = "country", expr = "country.upperAscii()" },
        { name = "amount", expr = "amount" },
        { name = "ts", expr = "ts" },
      ]
    },
    { watermark = { column = "ts", delay = "10m" } },
    { drop_duplicates = { name = "dedup", columns = ["order_id"] } },
    {
      aggregate = {
        name     = "revenue"
        group_by = [{ column = "country" }, { window = { column = "ts", duration = "5m" } }]
        aggregates = [
          { name = "orders", function = "count" },
          { name = "revenue", function = "sum", column = "amount" },
        ]
      }
    },
  ]
  sink        = { console = {} }
  output_mode = "update"
  trigger     = { processing_time = "1m" }
  checkpoint  = { location = "s3://checkpoints/revenue", min_batches_to_retain = 50, retention = "Delete" }
  state_store = { partitions = 16 }
  suspend     = true
  resources = {
    requests = { cpu = "500m", memory = "1Gi" }
    limits   = { memory = "2Gi" }
  }
  engine = {
    service_account_name = "revenue-engine"
    node_selector        = { pool = "streaming" }
    tolerations          = [{ key = "dedicated", operator = "Equal", value = "streaming", effect = "NoSchedule" }]
    affinity = {
      node_affinity = {
        required_during_scheduling_ignored_during_execution = {
          node_selector_terms = [{ match_expressions = [{ key = "zone", operator = "In", values = ["a", "b"] }] }]
        }
      }
    }
    priority_class_name = "streaming"
    image_pull_secrets  = [{ name = "registry" }]
    labels              = { team = "payments" }
    annotations         = { "prometheus.io/scrape" = "true" }
    env_from            = [{ secret_ref = { name = "revenue-env" } }]
    progress_timeout    = "15m"
  }
}
`

// kubectlQuery is importedConfig's query as a user writes it for kubectl: most of the spec,
// with the values that JSON keeps although they are zero (an empty console sink, an explicit
// failOnDataLoss: false).
func kubectlQuery(namespace string) *v1.StreamingQuery {
	columns := &v1.Schema{Columns: v1.Columns{
		{Name: "order_id", Type: v1.TypeString}, {Name: "country", Type: v1.TypeString},
		{Name: "amount", Type: v1.TypeDouble}, {Name: "ts", Type: v1.TypeTimestamp},
	}}
	return &v1.StreamingQuery{
		ObjectMeta: metav1.ObjectMeta{Name: "revenue", Namespace: namespace},
		Spec: v1.StreamingQuerySpec{
			Sources: []v1.Source{{
				Name: "orders",
				Kafka: &v1.KafkaSource{
					BootstrapServers: []string{"kafka-0:9092", "kafka-1:9092"}, Topics: []string{"orders"},
					StartingOffsets: v1.OffsetsEarliest, MaxOffsetsPerTrigger: ptrTo(int64(10000)), FailOnDataLoss: ptrTo(false),
					Format: v1.KafkaJSON,
					SASL:   &v1.KafkaSASL{Mechanism: v1.SASLScramSHA512, SecretName: "kafka-credentials"},
					TLS:    &v1.KafkaTLS{CASecretName: "kafka-ca", ServerName: "kafka.internal"},
				},
				Schema:      columns,
				OnMalformed: v1.MalformedDeadLetter, DeadLetterPath: "s3://dead-letters/orders",
			}, {
				Name: "returns",
				Files: &v1.FilesSource{Path: "s3://landing/returns/", Format: v1.FormatCSV, MaxFilesPerTrigger: ptrTo(int32(10)),
					S3: &v1.S3Connection{Endpoint: "https://minio.storage:9000", Region: "eu-west-1", SecretName: "landing-s3"}},
				Schema:      columns,
				OnMalformed: v1.MalformedSkip,
			}},
			Transform: []v1.Step{
				{Filter: "amount > 0.0"},
				{Select: []v1.Projection{
					{Name: "order_id", Expr: "order_id"}, {Name: "country", Expr: "country.upperAscii()"},
					{Name: "amount", Expr: "amount"}, {Name: "ts", Expr: "ts"},
				}},
				{Watermark: &v1.Watermark{Column: "ts", Delay: "10m"}},
				{DropDuplicates: &v1.DropDuplicates{Name: "dedup", Columns: []string{"order_id"}}},
				{Aggregate: &v1.Aggregate{
					Name:    "revenue",
					GroupBy: []v1.GroupKey{{Column: "country"}, {Window: &v1.Window{Column: "ts", Duration: "5m"}}},
					Aggregates: []v1.Aggregation{
						{Name: "orders", Function: v1.AggCount}, {Name: "revenue", Function: v1.AggSum, Column: "amount"},
					},
				}},
			},
			Sink:       v1.Sink{Console: &v1.ConsoleSink{}},
			OutputMode: v1.OutputUpdate,
			Trigger:    v1.Trigger{ProcessingTime: "1m"},
			Checkpoint: v1.Checkpoint{Location: "s3://checkpoints/revenue", MinBatchesToRetain: 50, Retention: v1.RetentionDelete},
			StateStore: v1.StateStore{Partitions: 16},
			Suspend:    true,
			Resources: v1.ResourceRequirements{
				Requests: map[string]resource.Quantity{"cpu": resource.MustParse("500m"), "memory": resource.MustParse("1Gi")},
				Limits:   map[string]resource.Quantity{"memory": resource.MustParse("2Gi")},
			},
			Engine: v1.EngineSpec{
				ServiceAccountName: "revenue-engine",
				NodeSelector:       map[string]string{"pool": "streaming"},
				Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "streaming",
					Effect: corev1.TaintEffectNoSchedule}},
				Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}}},
					}}},
				}},
				PriorityClassName: "streaming",
				ImagePullSecrets:  []corev1.LocalObjectReference{{Name: "registry"}},
				Labels:            map[string]string{"team": "payments"},
				Annotations:       map[string]string{"prometheus.io/scrape": "true"},
				EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "revenue-env"}}}},
				ProgressTimeout: "15m",
			},
		},
	}
}

// TestImportKubectlQuery imports a query that kubectl created — through the API server with
// a typed client, as kubectl sends it — and plans the configuration that says the same: the
// plan shows no changes (terraform plan -detailed-exitcode exits 0), as after an import with
// HashiCorp's providers. The first read after an import used to drop the values that are
// zero but present, such as the console sink's empty object (issue 23 #3).
func TestImportKubectlQuery(t *testing.T) {
	c := newTestCluster(t, testenv.ControlPlane(t))
	kubectl := testenv.Client(t, c.cfg)
	if err := kubectl.Create(context.Background(), kubectlQuery(c.namespace), client.FieldOwner("kubectl-create")); err != nil {
		t.Fatalf("create the query as kubectl would: %v", err)
	}

	tf := initMain(t, "terraform {\n  required_providers {\n    lockstep = { source = \"lockstep-dev/lockstep\" }\n  }\n}\n\n"+c.provider()+importedConfig)
	tf.Must("import", "-input=false", "-lock=false", address, c.namespace+"/revenue")
	if out, err := tf.Run("plan", "-detailed-exitcode", "-input=false", "-lock=false"); err != nil {
		t.Errorf("plan right after import is not empty (%v):\n%s", err, out)
	}
}
