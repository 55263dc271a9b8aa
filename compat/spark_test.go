package compat_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint/sparkckpt"
	"github.com/lockstep-dev/lockstep/compat"
)

// sparkRevenue is what Spark records of revenue(): one unnamed Kafka source, a dedup by
// order_id and a windowed aggregation by country with count, sum, max, sum, 8 shuffle
// partitions, and a watermark that has moved.
func sparkRevenue() *sparkckpt.Checkpoint {
	field := func(name, typ string) sparkckpt.StructField {
		return sparkckpt.StructField{Name: name, Type: json.RawMessage(typ), Nullable: true}
	}
	window := field("window", `{"type":"struct","fields":[{"name":"start","type":"timestamp","nullable":true},{"name":"end","type":"timestamp","nullable":true}]}`)
	schema := func(key, value []sparkckpt.StructField) map[string]sparkckpt.StateSchema {
		return map[string]sparkckpt.StateSchema{"default": {Version: 2, Families: []sparkckpt.ColumnFamily{{
			Name: "default", Key: sparkckpt.StructType{Fields: key}, Value: sparkckpt.StructType{Fields: value},
		}}}}
	}
	return &sparkckpt.Checkpoint{
		Metadata:     sparkckpt.Metadata{ID: "q"},
		Latest:       &sparkckpt.Offsets{Version: 1, BatchID: 3, Conf: map[string]string{"spark.sql.shuffle.partitions": "8"}},
		LatestCommit: &sparkckpt.Commit{Version: 1, BatchID: 3, NextBatchWatermarkMs: 60_000},
		Sources:      []sparkckpt.Source{{ID: "0", Kind: "kafka", Offset: json.RawMessage(`{"orders":{"0":12}}`)}},
		// As Spark numbers them: from the sink back, the aggregate 0 and the dedup 1.
		Operators: []sparkckpt.Operator{
			{
				OperatorMetadata: sparkckpt.OperatorMetadata{ID: 0, Name: "stateStoreSave"},
				Schemas: schema([]sparkckpt.StructField{field("country", `"string"`), window},
					[]sparkckpt.StructField{field("count", `"long"`), field("sum", `"double"`), field("max", `"double"`), field("sum", `"long"`)}),
			},
			{
				OperatorMetadata: sparkckpt.OperatorMetadata{ID: 1, Name: "dedupe"},
				Schemas:          schema([]sparkckpt.StructField{field("order_id", `"string"`)}, nil),
			},
		},
	}
}

func judgeSpark(t *testing.T, c *sparkckpt.Checkpoint, spec *v1.StreamingQuerySpec) (compat.Verdict, compat.Inference) {
	t.Helper()
	j, err := compat.Judge(compat.Facts{Spark: c}, spec)
	if err != nil {
		t.Fatal(err)
	}
	if j.Inference == nil {
		t.Fatal("Judge inferred nothing from a Spark checkpoint with a planned batch")
	}
	return j.Verdict, *j.Inference
}

// TestJudgeSparkWithoutBatch: a Spark checkpoint that planned no batch records nothing to judge
// against; the spec is judged as a fresh start.
func TestJudgeSparkWithoutBatch(t *testing.T) {
	c := sparkRevenue()
	c.Latest, c.LatestCommit = nil, nil
	j, err := compat.Judge(compat.Facts{Spark: c}, revenue().Spec())
	if err != nil || j.Inference != nil || j.Severity == compat.Rejected || !j.Fresh {
		t.Errorf("Judge of a Spark checkpoint without batches = %v, %v, %v; want a fresh start's verdict", j.Severity, j.Inference, err)
	}
}

// TestSparkCheckpointTheSameQuery: the query that wrote the checkpoint is not rejected, and the
// verdict says what it inferred and what it assumed.
func TestSparkCheckpointTheSameQuery(t *testing.T) {
	v, inf := judgeSpark(t, sparkRevenue(), revenue().Spec())
	if v.Severity == compat.Rejected {
		t.Fatalf("verdict = %s: %+v", v.Severity, brief(v.Findings))
	}
	for _, want := range []string{"source 0 of offsets/3: kafka, topics orders", "state/1: dropDuplicates (dedupe)",
		"state/0: state key (country string, window(ts, 5m))", "state/0: aggregate functions count, sum, max, sum", "state partitions 8"} {
		if !slices.ContainsFunc(inf.Inferred, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("inferred %q, want a line with %q", inf.Inferred, want)
		}
	}
	if !inf.Positional || len(inf.Assumed) == 0 {
		t.Errorf("inference = %+v, want positional sources and assumed facts", inf)
	}
}

// TestSparkCheckpointChangesSparkMisses: changes Spark's own restart check lets through
// (same types, other names or functions) are rejected against its checkpoint.
func TestSparkCheckpointChangesSparkMisses(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec *v1.StreamingQuerySpec
		rule string
	}{
		{"grouping column renamed", edit(revenue(), func(s *v1.StreamingQuerySpec) {
			s.Transform[4].Aggregate.GroupBy[0].Column = "order_id"
			s.Sink.Delta.PartitionColumns = nil
		}), "key-columns"},
		{"max becomes min", edit(revenue(), func(s *v1.StreamingQuerySpec) {
			s.Transform[4].Aggregate.Aggregates[2].Function = v1.AggMin
		}), "aggregate-function"},
		{"dedup by another column", edit(revenue(), func(s *v1.StreamingQuerySpec) {
			s.Transform[3].DropDuplicates.Columns = []string{"country"}
		}), "key-columns"},
		{"shuffle partitions", revenue().StatePartitions(4).Spec(), "state-partitions"},
		{"another topic", edit(revenue(), func(s *v1.StreamingQuerySpec) {
			s.Sources[0].Kafka.Topics = []string{"orders-v2"}
		}), "kafka-topics"},
		{"dedup removed", edit(revenue(), func(s *v1.StreamingQuerySpec) {
			s.Transform = slices.Delete(s.Transform, 3, 4)
		}), "operator-removed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, _ := judgeSpark(t, sparkRevenue(), tc.spec)
			if v.Severity != compat.Rejected || !slices.ContainsFunc(v.Findings, func(f compat.Finding) bool { return f.Rule == tc.rule && f.Severity == compat.Rejected }) {
				t.Errorf("verdict %s, findings %+v; want %s rejected", v.Severity, brief(v.Findings), tc.rule)
			}
		})
	}
}

// sparkSumCount is what Spark records of a job that sums and counts orders per country and
// 5-minute window after a watermark, with no dedup: one aggregation whose buffer is (sum
// double, count long), the buffer of avg(amount) as much as of sum(amount), count().
func sparkSumCount() *sparkckpt.Checkpoint {
	c := sparkRevenue()
	agg := c.Operators[0]
	field := func(name, typ string) sparkckpt.StructField {
		return sparkckpt.StructField{Name: name, Type: json.RawMessage(typ), Nullable: true}
	}
	s := agg.Schemas["default"]
	s.Families[0].Value = sparkckpt.StructType{Fields: []sparkckpt.StructField{field("sum", `"double"`), field("count", `"long"`)}}
	c.Operators = []sparkckpt.Operator{agg}
	return c
}

// sumCount is revenue without its dedup, aggregating sum(amount) and count(), as
// sparkSumCount's job does; edit changes its aggregates.
func sumCount(aggs ...v1.Aggregation) *v1.StreamingQuerySpec {
	return edit(revenue(), func(s *v1.StreamingQuerySpec) {
		s.Transform[revAggregate].Aggregate.Aggregates = aggs
		s.Transform = slices.Delete(s.Transform, revDedup, revDedup+1)
	})
}

// TestSparkCheckpointBufferFitsSeveralAggregates: Spark's buffer (sum double, count long)
// is avg(x)'s and sum(x), count()'s alike; a spec whose aggregates have that buffer is not
// refused, one whose aggregates do not is.
func TestSparkCheckpointBufferFitsSeveralAggregates(t *testing.T) {
	sum := v1.Aggregation{Name: "revenue", Function: v1.AggSum, Column: "amount"}
	count := v1.Aggregation{Name: "orders", Function: v1.AggCount}
	avg := v1.Aggregation{Name: "mean", Function: v1.AggAvg, Column: "amount"}
	for _, tc := range []struct {
		name     string
		spec     *v1.StreamingQuerySpec
		rejected []string
	}{
		{"sum and count, the job unchanged", sumCount(sum, count), nil},
		{"avg", sumCount(avg), nil},
		{"count and sum", sumCount(count, sum), []string{"aggregate-function"}},
		{"sum alone", sumCount(sum), []string{"aggregate-removed"}},
		{"max and count", sumCount(v1.Aggregation{Name: "top", Function: v1.AggMax, Column: "amount"}, count), []string{"aggregate-function"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, _ := judgeSpark(t, sparkSumCount(), tc.spec)
			var rejected []string
			for _, f := range v.Findings {
				if f.Severity == compat.Rejected {
					rejected = append(rejected, f.Rule)
				}
			}
			if rejected = slices.Compact(rejected); !slices.Equal(rejected, tc.rejected) {
				t.Errorf("rejected by %q, want %q: %+v", rejected, tc.rejected, brief(v.Findings))
			}
		})
	}
}

// TestSparkCheckpointStepAddedBeforeTheAggregate: Spark numbers its stateful operators from
// the sink, so the aggregation of a job without a dedup is the spec's aggregate, and a
// dropDuplicates the spec adds before it is a step added, not an aggregate changed.
func TestSparkCheckpointStepAddedBeforeTheAggregate(t *testing.T) {
	spec := edit(revenue(), func(s *v1.StreamingQuerySpec) {
		s.Transform[revAggregate].Aggregate.Aggregates = []v1.Aggregation{
			{Name: "revenue", Function: v1.AggSum, Column: "amount"}, {Name: "orders", Function: v1.AggCount}}
	})
	v, _ := judgeSpark(t, sparkSumCount(), spec)
	want := []finding{{Rule: "operator-added", Severity: compat.Rejected, Path: "spec.transform[3].dropDuplicates", New: "dropDuplicates step \"dedup\" by (order_id string)"}}
	var got []finding
	for _, f := range brief(v.Findings) {
		if f.Severity == compat.Rejected {
			got = append(got, f)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rejections (-want +got):\n%s", diff)
	}
}

// windowsOf is the windows a state holds of rows at the given minutes after 10:00, windows of
// size minutes sliding by slide minutes.
func windowsOf(size, slide int, minutes ...int) []sparkckpt.Window {
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	var ws []sparkckpt.Window
	for _, m := range minutes {
		for start := m / slide * slide; start > m-size; start -= slide {
			s := t0.Add(time.Duration(start) * time.Minute)
			ws = append(ws, sparkckpt.Window{Start: s, End: s.Add(time.Duration(size) * time.Minute)})
		}
	}
	return ws
}

// TestSparkCheckpointWindowFromStateRows: a window's size and slide are read from the
// windows in the state rows, and judged.
func TestSparkCheckpointWindowFromStateRows(t *testing.T) {
	sum := v1.Aggregation{Name: "revenue", Function: v1.AggSum, Column: "amount"}
	count := v1.Aggregation{Name: "orders", Function: v1.AggCount}
	window := func(d, slide v1.Duration) *v1.StreamingQuerySpec {
		s := sumCount(sum, count)
		w := s.Transform[revAggregate-1].Aggregate.GroupBy[1].Window
		w.Duration, w.Slide = d, slide
		return s
	}
	for _, tc := range []struct {
		name     string
		windows  []sparkckpt.Window
		spec     *v1.StreamingQuerySpec
		rejected []string
		inferred string
	}{
		{"the same 5-minute windows", windowsOf(5, 5, 1, 7, 12), window("5m", ""), nil, "windows of 5m (end − start and the starts of 3 windows"},
		{"the same, written in seconds", windowsOf(5, 5, 1, 7), window("300s", ""), nil, "windows of 5m"},
		{"10-minute windows instead of 5", windowsOf(5, 5, 1, 7), window("10m", ""), []string{"window-size"}, "windows of 5m"},
		{"sliding windows", windowsOf(10, 5, 1, 7), window("10m", "5m"), nil, "windows of 10m, slide 5m"},
		{"tumbling instead of sliding", windowsOf(10, 5, 1, 7), window("10m", ""), []string{"window-slide"}, "windows of 10m, slide 5m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := sparkSumCount()
			c.Operators[0].Windows = tc.windows
			v, inf := judgeSpark(t, c, tc.spec)
			var rejected []string
			for _, f := range v.Findings {
				if f.Severity == compat.Rejected {
					rejected = append(rejected, f.Rule)
				}
				if f.Rule == "spark-unrecorded" && strings.HasSuffix(f.Path, ".window") {
					t.Errorf("spark-unrecorded names the window, which the state rows tell: %+v", f)
				}
			}
			if !slices.Equal(slices.Compact(rejected), tc.rejected) {
				t.Errorf("rejected by %q, want %q: %+v", rejected, tc.rejected, brief(v.Findings))
			}
			if !slices.ContainsFunc(inf.Inferred, func(s string) bool { return strings.Contains(s, tc.inferred) }) {
				t.Errorf("inferred %q, want a line with %q", inf.Inferred, tc.inferred)
			}
		})
	}
}
