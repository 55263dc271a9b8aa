package compat_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

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
