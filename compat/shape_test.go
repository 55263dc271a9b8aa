package compat_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/compat"
)

// exampleQueries reads every query in examples/queries.
func exampleQueries(t *testing.T) map[string]*v1.StreamingQuery {
	t.Helper()
	paths, err := filepath.Glob("../examples/queries/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no example queries: %v", err)
	}
	queries := map[string]*v1.StreamingQuery{}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := v1.ReadQuery(f)
		f.Close()
		if err != nil {
			t.Fatalf("ReadQuery(%s) = %v", p, err)
		}
		queries[filepath.Base(p)] = q
	}
	return queries
}

// shapeThroughJSON returns the shape of spec, and that shape as a checkpoint records it:
// marshalled to JSON and parsed back.
func shapeThroughJSON(t *testing.T, spec *v1.StreamingQuerySpec) (sh, back compat.Shape) {
	t.Helper()
	sh, err := compat.ShapeOf(spec)
	if err != nil {
		t.Fatalf("ShapeOf() = %v", err)
	}
	data, err := json.Marshal(sh)
	if err != nil {
		t.Fatal(err)
	}
	if back, err = compat.ParseShape(data); err != nil {
		t.Fatalf("ParseShape(%s) = %v", data, err)
	}
	return sh, back
}

// TestExamplesAreCompatibleWithThemselves: restarting any example unchanged from its own
// round-tripped shape is allowed, with no finding beyond what Check reports with no
// checkpoint yet (the rules that judge the new spec alone, such as unbounded-state).
func TestExamplesAreCompatibleWithThemselves(t *testing.T) {
	for name, q := range exampleQueries(t) {
		t.Run(name, func(t *testing.T) {
			_, back := shapeThroughJSON(t, &q.Spec)
			v := compat.Check(back, &q.Spec)
			fresh := compat.Check(compat.Shape{}, &q.Spec)
			if v.Fresh || v.Severity != fresh.Severity || v.Severity == compat.Rejected {
				t.Errorf("Check(ShapeOf(q), q) = %+v, want %s, as with no checkpoint", v, fresh.Severity)
			}
			if diff := cmp.Diff(brief(fresh.Findings), brief(v.Findings)); diff != "" {
				t.Errorf("Check(ShapeOf(q), q) finds more than with no checkpoint (-without +with):\n%s", diff)
			}
		})
	}
}

// TestShapeJSONRoundTrip: every fixture's shape survives JSON unchanged and Equal to itself.
func TestShapeJSONRoundTrip(t *testing.T) {
	specs := map[string]*v1.StreamingQuerySpec{
		"revenue": revenue().Spec(), "revenueUpdate": revenueUpdate().Spec(), "revenueNoWatermark": revenueNoWatermark().Spec(),
		"clean": clean().Spec(), "cleanKafka": cleanKafka().Spec(), "ticks": ticks().Spec(), "tables": tables().Spec(),
		"webhook": cleanKafka().WebhookSink("https://hooks.example.com/a").Spec(),
		"sliding": edit(revenue(), func(s *v1.StreamingQuerySpec) { agg(s).GroupBy[1].Window.Slide = "1m" }),
		"pattern": edit(revenue(), func(s *v1.StreamingQuerySpec) {
			s.Sources[0].Kafka.Topics, s.Sources[0].Kafka.TopicPattern = nil, "o-.*"
		}),
		"limits": edit(tables(), func(s *v1.StreamingQuerySpec) {
			s.Sources[0].Delta.MaxFilesPerTrigger, s.Sources[0].Delta.StartingVersion = ptr[int32](3), ptr[int64](7)
		}),
		"global": pageCounts().Aggregate("", nil, v1.Aggregation{Name: "n", Function: v1.AggCount}).Spec(),
		"raw": edit(cleanKafka(), func(s *v1.StreamingQuerySpec) {
			s.Sources[0].Kafka.Format, s.Sources[0].Schema = v1.KafkaRaw, nil
			s.Transform = nil
		}),
		"exactly1": edit(cleanKafka(), func(s *v1.StreamingQuerySpec) { s.Sink.Kafka.ExactlyOnce = true }),
	}
	for name, q := range exampleQueries(t) {
		specs[name] = &q.Spec
	}
	for name, spec := range specs {
		t.Run(name, func(t *testing.T) {
			sh, back := shapeThroughJSON(t, spec)
			if diff := cmp.Diff(sh, back); diff != "" {
				t.Errorf("shape changed through JSON (-before +after):\n%s", diff)
			}
			if !back.Equal(sh) {
				t.Errorf("Equal() = false after a round trip")
			}
		})
	}
}

// TestShapeJSON pins the JSON form of DESIGN §2's query: a change to it must bump
// ShapeVersion.
func TestShapeJSON(t *testing.T) {
	q := exampleQueries(t)["revenue-by-country.yaml"]
	sh, err := compat.ShapeOf(&q.Spec)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.MarshalIndent(sh, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "shape-revenue-by-country.golden", append(data, '\n'))
}

func TestShapeOf(t *testing.T) {
	t.Run("a spec that does not validate has no shape", func(t *testing.T) {
		_, err := compat.ShapeOf(edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Sink = v1.Sink{} }))
		if err == nil || !strings.Contains(err.Error(), "spec.sink") {
			t.Errorf("ShapeOf() = %v, want an error naming spec.sink", err)
		}
	})
	t.Run("defaults are applied without changing the spec", func(t *testing.T) {
		spec := edit(clean(), func(s *v1.StreamingQuerySpec) { s.OutputMode, s.StateStore.Partitions = "", 0 })
		sh, err := compat.ShapeOf(spec)
		if err != nil {
			t.Fatal(err)
		}
		if sh.OutputMode != v1.OutputAppend || sh.Pinned.StatePartitions != v1.DefaultStatePartitions {
			t.Errorf("ShapeOf() = %s mode, %d partitions; want append, %d", sh.OutputMode, sh.Pinned.StatePartitions, v1.DefaultStatePartitions)
		}
		if spec.OutputMode != "" || spec.StateStore.Partitions != 0 {
			t.Errorf("ShapeOf changed its argument: %+v", spec)
		}
	})
	t.Run("a webhook URL is recorded without credentials", func(t *testing.T) {
		sh, err := compat.ShapeOf(cleanKafka().WebhookSink("https://user:secret@hooks.example.com/in?token=abc#f").Spec())
		if err != nil {
			t.Fatal(err)
		}
		if got, want := sh.Sink.URL, "https://hooks.example.com/in"; got != want {
			t.Errorf("Sink.URL = %q, want %q", got, want)
		}
	})
	t.Run("no connection details", func(t *testing.T) {
		sh, err := compat.ShapeOf(revenue().Spec())
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(sh)
		if strings.Contains(string(data), "kafka:9092") {
			t.Errorf("the shape records bootstrap servers: %s", data)
		}
	})
}

// TestParseShapeVersion1: a shape recorded before joins (version 1) still reads.
func TestParseShapeVersion1(t *testing.T) {
	sh, err := compat.ParseShape([]byte(`{"version": 1, "sources": [], "sink": {"kind": "console"}, "outputMode": "append", "pinned": {"statePartitions": 8}}`))
	if err != nil || sh.Version != 1 || len(sh.Joins) != 0 {
		t.Fatalf("ParseShape(version 1) = %+v, %v", sh, err)
	}
}

func TestParseShape(t *testing.T) {
	cases := []struct {
		name    string
		data    string
		wantErr error
	}{
		{name: "newer version", data: `{"version": 5, "future": true}`, wantErr: compat.ErrNewerShape},
		{name: "no version", data: `{"sources": []}`},
		{name: "unknown field", data: `{"version": 1, "sources": [], "sink": {"kind": "console"}, "pinned": {"statePartitions": 8}, "extra": 1}`},
		{name: "not JSON", data: `v1`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := compat.ParseShape([]byte(tc.data))
			if err == nil {
				t.Fatalf("ParseShape(%s) = nil error", tc.data)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("ParseShape(%s) = %v, want %v", tc.data, err, tc.wantErr)
			}
		})
	}
}

func TestEqual(t *testing.T) {
	a, _ := compat.ShapeOf(revenue().Spec())
	b, _ := compat.ShapeOf(revenue().Checkpoint("s3://elsewhere").Spec())
	c, _ := compat.ShapeOf(revenue().ProcessingTime("2m").Spec())
	if !a.Equal(b) {
		t.Errorf("shapes of specs differing only in checkpoint location are not Equal")
	}
	if a.Equal(c) {
		t.Errorf("shapes of specs with different triggers are Equal")
	}
}
