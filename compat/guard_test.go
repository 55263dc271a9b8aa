package compat_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/compat"
)

func TestCheckWithoutCheckpoint(t *testing.T) {
	t.Run("everything is allowed", func(t *testing.T) {
		v := compat.Check(compat.Shape{}, revenueEvicting().Spec())
		if !v.Fresh || v.Severity != compat.Allowed || len(v.Findings) != 0 {
			t.Errorf("Check(zero shape) = %+v, want fresh and allowed without findings", v)
		}
		if v.Guarantee != v1.GuaranteeExactlyOnce || v.GuaranteeReason == "" {
			t.Errorf("Check(zero shape) guarantee = %q (%q), want exactly-once with a reason", v.Guarantee, v.GuaranteeReason)
		}
	})
	t.Run("state that grows without bound is a warning", func(t *testing.T) {
		v := compat.Check(compat.Shape{}, revenue().Spec())
		want := []finding{{Rule: "unbounded-state", Severity: compat.Warning, Path: "spec.transform[3].dropDuplicates"}}
		if diff := cmp.Diff(want, brief(v.Findings)); !v.Fresh || v.Severity != compat.Warning || diff != "" {
			t.Errorf("Check(zero shape) = fresh %v, %s; findings (-want +got):\n%s", v.Fresh, v.Severity, diff)
		}
		if j, err := compat.Judge(compat.Facts{}, revenue().Spec()); err != nil || j.Err() != nil {
			t.Errorf("Judge(no facts) = %v, %v; want nil, nil: a warning does not stop the engine", j.Err(), err)
		}
	})
}

// TestJudge: the one judge, as the engine's start guard uses it.
func TestJudge(t *testing.T) {
	old, err := compat.ShapeOf(revenue().Spec())
	if err != nil {
		t.Fatal(err)
	}
	t.Run("no checkpoint", func(t *testing.T) {
		j, err := compat.Judge(compat.Facts{}, revenue().Spec())
		if err != nil || !j.Fresh || j.Err() != nil || j.Inference != nil {
			t.Errorf("Judge(no facts) = %+v, %v; want fresh, nil", j, err)
		}
	})
	t.Run("warnings pass", func(t *testing.T) {
		j, err := compat.Judge(compat.Facts{Committed: &old}, edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Transform[revWatermark].Watermark.Delay = "1h" }))
		if err != nil || j.Severity != compat.Warning || j.Err() != nil || len(j.Warnings()) == 0 {
			t.Errorf("Judge() = %s (%d warnings), %v, %v; want warnings, nil", j.Severity, len(j.Warnings()), j.Err(), err)
		}
	})
	t.Run("a rejected change is a RejectedError", func(t *testing.T) {
		j, err := compat.Judge(compat.Facts{Committed: &old}, edit(revenue(), func(s *v1.StreamingQuerySpec) { agg(s).Aggregates[2].Function = v1.AggMin }))
		if err != nil {
			t.Fatal(err)
		}
		err = j.Err()
		var rej *compat.RejectedError
		if !errors.As(err, &rej) {
			t.Fatalf("Judge().Err() = %v, want a *RejectedError", err)
		}
		if j.Severity != compat.Rejected || rej.Verdict.Severity != compat.Rejected {
			t.Errorf("Judge() verdict = %s, error's verdict = %s; want rejected", j.Severity, rej.Verdict.Severity)
		}
		for _, want := range []string{"aggregate-function", "spec.transform[4].aggregate.aggregates[2].function"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %s", err, want)
			}
		}
	})
	t.Run("an invalid spec is an error, not a rejection", func(t *testing.T) {
		_, err := compat.Judge(compat.Facts{Committed: &old}, edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Sink = v1.Sink{} }))
		var rej *compat.RejectedError
		if err == nil || errors.As(err, &rej) {
			t.Errorf("Judge() error = %v, want a validation error", err)
		}
	})
	t.Run("the committed shape is judged against before a Spark checkpoint", func(t *testing.T) {
		// Lockstep's records win: they hold the whole shape, Spark's files a part of it.
		j, err := compat.Judge(compat.Facts{Committed: &old, Spark: sparkRevenue()}, revenue().Spec())
		if err != nil || j.Inference != nil || j.Severity == compat.Rejected {
			t.Errorf("Judge(committed and spark) = %s, inference %v, %v; want not rejected, from the committed shape", j.Severity, j.Inference, err)
		}
	})
}

func TestGuaranteeOf(t *testing.T) {
	cases := []struct {
		name string
		spec *v1.StreamingQuerySpec
		want v1.Guarantee
	}{
		{"delta", revenue().Spec(), v1.GuaranteeExactlyOnce},
		{"files", clean().Spec(), v1.GuaranteeExactlyOnce},
		{"kafka", cleanKafka().Spec(), v1.GuaranteeAtLeastOnce},
		{"kafka with transactions", edit(cleanKafka(), func(s *v1.StreamingQuerySpec) { s.Sink.Kafka.ExactlyOnce = true }), v1.GuaranteeExactlyOnce},
		{"webhook", cleanKafka().WebhookSink("https://h.example.com/x").Spec(), v1.GuaranteeAtLeastOnce},
		{"console", ticks().Spec(), v1.GuaranteeNone},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, reason := compat.GuaranteeOf(tc.spec)
			if got != tc.want || reason == "" {
				t.Errorf("GuaranteeOf() = %s (%q), want %s with a reason", got, reason, tc.want)
			}
		})
	}
	// Each reason says what a reader must do, in the sink's own terms.
	for _, tc := range []struct {
		spec *v1.StreamingQuerySpec
		want []string
	}{
		{cleanKafka().WebhookSink("https://h.example.com/x").Spec(), []string{"Idempotency-Key", "<query id>:<batch id>[:<chunk>]"}},
		{cleanKafka().Spec(), []string{"lockstep-batch header", "exactlyOnce: true"}},
		{edit(cleanKafka(), func(s *v1.StreamingQuerySpec) { s.Sink.Kafka.ExactlyOnce = true }), []string{"lockstep-<query id>", "read_committed"}},
	} {
		_, reason := compat.GuaranteeOf(tc.spec)
		for _, w := range tc.want {
			if !strings.Contains(reason, w) {
				t.Errorf("the %s sink's reason %q does not say %q", tc.spec.Sink.Kind(), reason, w)
			}
		}
	}
}

func TestSinkSwitch(t *testing.T) {
	kinds := []v1.SinkKind{v1.SinkDelta, v1.SinkFiles, v1.SinkKafka, v1.SinkWebhook, v1.SinkConsole}
	for _, from := range kinds {
		for _, to := range kinds {
			got := compat.SinkSwitch(from, to, v1.OutputAppend)
			var want compat.Severity
			switch {
			case from == to || to == v1.SinkConsole:
				want = compat.Allowed
			case to == v1.SinkKafka || to == v1.SinkWebhook:
				want = compat.Warning
			default:
				want = compat.Rejected
			}
			if got != want {
				t.Errorf("SinkSwitch(%s, %s, append) = %s, want %s", from, to, got, want)
			}
		}
	}
	if got := compat.SinkSwitch(v1.SinkKafka, v1.SinkDelta, v1.OutputComplete); got != compat.Warning {
		t.Errorf("SinkSwitch(kafka, delta, complete) = %s, want warning", got)
	}
}
