package compat_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/compat"
)

// TestRebuildAccepted: with spec.onIncompatibleChange: rebuild, a change a possible rebuild
// answers is accepted with warnings, and the start guard's error asks for the rebuild; an
// impossible one stays refused.
func TestRebuildAccepted(t *testing.T) {
	old, err := compat.ShapeOf(revenue().Spec())
	if err != nil {
		t.Fatal(err)
	}
	spec := edit(revenue(), func(s *v1.StreamingQuerySpec) {
		agg(s).Aggregates[2].Function = v1.AggMin
		s.OnIncompatibleChange = v1.OnIncompatibleRebuild
	})
	j, err := compat.Judge(compat.Facts{Committed: &old, Rebuild: &compat.Rebuild{Replay: checkpoint.Replay{Batches: 3, Records: 10}}}, spec)
	if err != nil {
		t.Fatal(err)
	}
	var need *compat.RebuildRequiredError
	if !j.Rebuild || j.Severity != compat.Warning || len(j.Rejected()) != 0 || !errors.As(j.Err(), &need) {
		t.Fatalf("Judge() = %+v, err %v; want accepted by a rebuild with warnings and a RebuildRequiredError", j.Verdict, j.Err())
	}
	if w := j.Warnings(); w[0].Rule != "aggregate-function" || !strings.Contains(w[0].Remedy, "Accepted by spec.onIncompatibleChange: rebuild: before it runs on, the query rebuilds its state from the retained input; it replays batches 0–2 (10 records)") {
		t.Errorf("warnings = %+v", w)
	}
	j, err = compat.Judge(compat.Facts{Committed: &old, Rebuild: &compat.Rebuild{Impossible: "lost"}}, spec)
	if err != nil || j.Rebuild || j.Severity != compat.Rejected {
		t.Errorf("Judge(impossible) = %+v, %v; want rejected", j.Verdict, err)
	}
}

// TestRebuildOffered: a refusal a rebuild answers offers it, with its cost or why it is not
// possible, on both runtimes; one it does not answer (a source change) does not.
func TestRebuildOffered(t *testing.T) {
	old, err := compat.ShapeOf(revenue().Spec())
	if err != nil {
		t.Fatal(err)
	}
	onSpark := func(s *v1.StreamingQuerySpec) { s.Runtime.Spark = &v1.SparkRuntime{} }
	oldSpark, err := compat.ShapeOf(edit(revenue(), onSpark))
	if err != nil {
		t.Fatal(err)
	}
	possible := &compat.Rebuild{Replay: checkpoint.Replay{Batches: 12, Records: 3400, Took: 95 * time.Second}}
	lost := &compat.Rebuild{Impossible: "the offsets log keeps batches 3–11 only"}
	keyChange := func(s *v1.StreamingQuerySpec) { agg(s).Aggregates[2].Function = v1.AggMin }
	for _, tc := range []struct {
		name    string
		edit    func(*v1.StreamingQuerySpec)
		rebuild *compat.Rebuild
		want    string // in every rejected finding's remedy; "" for no mention
	}{
		{"possible", keyChange, possible, "Or rebuild the state from the retained input (`lockstep checkpoint rebuild`, or spec.onIncompatibleChange: rebuild): it replays batches 0–11 (3400 records) through the new query, about 1m35s at the rate they first ran; output already written stays; from batch 12 on the output follows the new query."},
		{"not possible", keyChange, lost, "Rebuilding the state from the retained input is not possible: the offsets log keeps batches 3–11 only."},
		{"not gathered", keyChange, nil, ""},
		{"sources unchecked", keyChange, &compat.Rebuild{Replay: possible.Replay, Unchecked: "admission does not connect to the sources"},
			"from batch 12 on the output follows the new query; whether the sources still hold that input was not checked (admission does not connect to the sources); a rebuild that meets lost input stops and leaves the checkpoint as it was."},
		{"spark", func(s *v1.StreamingQuerySpec) { keyChange(s); onSpark(s) }, possible, "Or rebuild the state from the retained input (`lockstep checkpoint rebuild`, or spec.onIncompatibleChange: rebuild): it replays batches 0–11"},
		{"a source change", func(s *v1.StreamingQuerySpec) { keyChange(s); s.Sources[0].Kafka.Topics = []string{"other"} }, possible, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			committed := &old
			if tc.name == "spark" {
				committed = &oldSpark
			}
			j, err := compat.Judge(compat.Facts{Committed: committed, Rebuild: tc.rebuild}, edit(revenue(), tc.edit))
			if err != nil {
				t.Fatal(err)
			}
			rejected := j.Rejected()
			if len(rejected) == 0 {
				t.Fatalf("Judge() = %+v, want a refusal", j.Verdict)
			}
			for _, f := range rejected {
				mentions := strings.Contains(f.Remedy, "ebuild the state") || strings.Contains(f.Remedy, "ebuilding the state")
				if tc.want == "" && mentions || tc.want != "" && !strings.Contains(f.Remedy, tc.want) {
					t.Errorf("%s remedy = %q, want %q", f.Rule, f.Remedy, tc.want)
				}
			}
		})
	}
}

// TestReadRebuildSparkRecords: records whose offsets log starts after batch 0 make a rebuild
// impossible, unless they are the spark runtime's (a Spark checkpoint Lockstep adopted records
// the adopted batch on): its rebuild replays Spark's own offsets log, which ReadRebuild does
// not read, so the rebuild is offered unchecked and the runtime's plan decides.
func TestReadRebuildSparkRecords(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		conf map[string]string
		want func(*compat.Rebuild) bool
	}{
		{"built-in", nil, func(r *compat.Rebuild) bool { return strings.Contains(r.Impossible, "keeps batches 4–4 only") }},
		{"spark", map[string]string{"runtime": "spark"}, func(r *compat.Rebuild) bool {
			return r.Impossible == "" && r.Replay.Batches == 5 && strings.Contains(r.Unchecked, "Lockstep's records start at batch 4")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := claimed(t)
			if err := c.AddOffsets(ctx, checkpoint.Offsets{BatchID: 4, Conf: tc.conf}); err != nil {
				t.Fatal(err)
			}
			if err := c.AddCommit(ctx, checkpoint.Commit{BatchID: 4}); err != nil {
				t.Fatal(err)
			}
			if r := compat.ReadRebuild(ctx, c); !tc.want(r) {
				t.Errorf("ReadRebuild = %+v", r)
			}
		})
	}
}
