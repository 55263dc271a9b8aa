package v1_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
)

const minimal = `
apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: q}
spec:
  sources:
  - name: ticks
    rate: {}
  - name: k
    kafka: {bootstrapServers: ["kafka:9092"], topics: [t], format: raw, sasl: {mechanism: PLAIN}}
  transform:
  - select: [{name: value, expr: "string(value)"}]
  sink:
    webhook: {url: "http://hook"}
`

func TestParseQueryAppliesDefaults(t *testing.T) {
	got, err := v1.ParseQuery([]byte(minimal))
	if err != nil {
		t.Fatalf("ParseQuery() error = %v", err)
	}
	want := qt.Make("q", "default").
		Source(v1.Source{Name: "ticks", Rate: &v1.RateSource{RowsPerSecond: 1}, OnMalformed: v1.MalformedFail}).
		Source(v1.Source{Name: "k", OnMalformed: v1.MalformedFail, Kafka: &v1.KafkaSource{
			BootstrapServers: []string{"kafka:9092"}, Topics: []string{"t"}, Format: v1.KafkaRaw,
			StartingOffsets: "latest", FailOnDataLoss: ptr(true),
			SASL: &v1.KafkaSASL{Mechanism: v1.SASLPlain, UsernameEnv: "LOCKSTEP_KAFKA_USERNAME", PasswordEnv: "LOCKSTEP_KAFKA_PASSWORD"},
		}}).
		Select(qt.As("value", "string(value)")).
		Sink(v1.Sink{Webhook: &v1.WebhookSink{URL: "http://hook", MaxRowsPerRequest: 1000, Timeout: "30s"}}).
		Edit(func(s *v1.StreamingQuerySpec) {
			s.OutputMode = v1.OutputAppend
			s.Checkpoint = v1.Checkpoint{MinBatchesToRetain: 100, Retention: v1.RetentionRetain}
			s.StateStore = v1.StateStore{Partitions: 8}
		}).Obj()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseQuery() mismatch (-want +got):\n%s", diff)
	}

	// Defaulting is idempotent and never overrides a set value.
	again := got.DeepCopy()
	again.Default()
	if diff := cmp.Diff(got, again); diff != "" {
		t.Errorf("Default() twice changed the query (-once +twice):\n%s", diff)
	}
	set := qt.Make("q", "ns").RateSource("r", 7).FilesSink("/o", v1.FormatJSON).OutputMode(v1.OutputUpdate).StatePartitions(3).Obj()
	set.Default()
	if set.Spec.Sources[0].Rate.RowsPerSecond != 7 || set.Spec.Sink.Files.Format != v1.FormatJSON || set.Spec.OutputMode != v1.OutputUpdate || set.Spec.StateStore.Partitions != 3 {
		t.Errorf("Default() overrode set values: %+v", set.Spec)
	}
}

func TestParseQueryIsStrict(t *testing.T) {
	cases := []struct {
		name     string
		manifest string
		want     []string
	}{
		{
			name:     "unknown field is named by its path",
			manifest: strings.Replace(minimal, "rate: {}", "rate: {rowsPerSec: 5}", 1),
			want:     []string{`unknown field "spec.sources[0].rate.rowsPerSec"`},
		},
		{
			name:     "every unknown field is reported",
			manifest: strings.Replace(minimal, "  sink:", "  sinks: {}\n  outputmode: append\n  sink:", 1),
			want:     []string{`unknown field "spec.outputmode"`, `unknown field "spec.sinks"`},
		},
		{
			name:     "duplicate field",
			manifest: strings.Replace(minimal, "rate: {}", "rate: {}\n    rate: {}", 1),
			want:     []string{`"rate" already set in map`},
		},
		{
			name:     "wrong type",
			manifest: strings.Replace(minimal, "rate: {}", "rate: {rowsPerSecond: many}", 1),
			want:     []string{"rowsPerSecond"},
		},
		{
			name:     "unquoted JSON offsets are an object, not a string",
			manifest: strings.Replace(minimal, "topics: [t],", `topics: [t], startingOffsets: {"t": {"0": 1}},`, 1),
			want:     []string{"startingOffsets"},
		},
		{
			name:     "wrong kind",
			manifest: strings.Replace(minimal, "kind: StreamingQuery", "kind: CheckpointStore", 1),
			want:     []string{`want apiVersion "streaming.lockstep.dev/v1", kind "StreamingQuery"`},
		},
		{
			name:     "wrong apiVersion",
			manifest: strings.Replace(minimal, "streaming.lockstep.dev/v1", "streaming.lockstep.dev/v1beta1", 1),
			want:     []string{`apiVersion "streaming.lockstep.dev/v1beta1"`},
		},
		{
			name:     "two documents",
			manifest: minimal + "---\n" + minimal,
			want:     []string{"holds 2 documents"},
		},
		{
			name:     "empty",
			manifest: "# nothing\n---\n",
			want:     []string{"empty"},
		},
		{
			name:     "a name YAML reads as a boolean",
			manifest: strings.Replace(minimal, "name: ticks", "name: n", 1),
			want:     []string{"spec.sources.name: a boolean where a string belongs", `quote the value (for example "n")`},
		},
		{
			name:     "malformed YAML",
			manifest: "spec: [",
			want:     []string{"invalid manifest"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v1.ParseQuery([]byte(tc.manifest))
			var me *v1.ManifestError
			if !errors.As(err, &me) {
				t.Fatalf("ParseQuery() error = %v, want a *ManifestError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("ParseQuery() error = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestReadQueryJSON(t *testing.T) {
	q, err := v1.ReadQuery(strings.NewReader(`{"apiVersion":"streaming.lockstep.dev/v1","kind":"StreamingQuery",
		"metadata":{"name":"j","namespace":"team"},
		"spec":{"sources":[{"name":"r","rate":{"rowsPerSecond":5}}],"sink":{"console":{}}}}`))
	if err != nil {
		t.Fatalf("ReadQuery() error = %v", err)
	}
	if q.Namespace != "team" || q.Spec.Sources[0].Rate.RowsPerSecond != 5 || q.Spec.Sink.Console == nil {
		t.Errorf("ReadQuery() = %+v", q)
	}
	if errs := q.Validate(); len(errs) > 0 {
		t.Errorf("Validate() = %v, want no errors", errs)
	}
}
