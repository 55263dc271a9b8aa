package engine

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
)

// TestSelectCopiesBareColumns: a projection that is a bare column name
// copies the value without CEL, and yields what CEL would (nulls included).
func TestSelectCopiesBareColumns(t *testing.T) {
	spec := querytest.Make("q", "default").
		FilesSource("in", "/in", v1.FormatJSON,
			querytest.Col("id", v1.TypeString), querytest.Col("n", v1.TypeLong), querytest.Col("at", v1.TypeTimestamp)).
		Select(querytest.As("at", " at "), querytest.As("id", "id"), querytest.As("twice", "n * 2"), querytest.As("n", "n"), querytest.As("same", "id + ''")).
		ConsoleSink().Spec()
	steps := benchSteps(t, spec)
	if from := steps[0].(*selectStep).from; !cmp.Equal(from, []int{2, 0, -1, 1, -1}) {
		t.Errorf("copied columns %v, want [2 0 -1 1 -1]", from)
	}
	at := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	got, err := steps[0].process(&stepBatch{}, []Row{{"a", int64(3), at}, {nil, nil, nil}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{{at, "a", int64(6), int64(3), "a"}, {nil, nil, nil, nil, nil}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("select (-want +got):\n%s", diff)
	}
}
