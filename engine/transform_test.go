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

// TestSelectInPlace: a select no wider than its input writes its output over the input rows,
// which only the sources and the stateless steps before it have held; an expression still reads
// the columns as they were, even one an earlier output replaces. After a stateful step, whose
// state may keep the rows it was given, a select makes new rows.
func TestSelectInPlace(t *testing.T) {
	in := []v1.Column{querytest.Col("a", v1.TypeLong), querytest.Col("b", v1.TypeLong), querytest.Col("c", v1.TypeString), querytest.Col("ts", v1.TypeTimestamp)}
	q := querytest.Make("q", "default").FilesSource("in", "/in", v1.FormatJSON, in...).
		Filter("a > 0").
		Select(querytest.As("a", "b"), querytest.As("b", "a"), querytest.As("s", "a + b"), querytest.As("c", "c"))
	steps := benchSteps(t, q.ConsoleSink().Spec())
	at := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	rows := []Row{{int64(1), int64(2), "x", at}, {int64(-1), int64(5), "y", at}, {int64(3), nil, "z", at}}
	first := &rows[0][0]
	out := rows
	for _, st := range steps {
		var err error
		if out, err = st.process(&stepBatch{}, out); err != nil {
			t.Fatal(err)
		}
	}
	want := []Row{{int64(2), int64(1), int64(3), "x"}, {nil, int64(3), nil, "z"}}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("select (-want +got):\n%s", diff)
	}
	if &out[0][0] != first {
		t.Error("the select made new rows; want its output written over its input")
	}
	stateful := querytest.Make("q", "default").FilesSource("in", "/in", v1.FormatJSON, in...).
		Watermark("ts", "1s").DropDuplicates("", "a").
		Select(querytest.As("a", "b"))
	steps = benchSteps(t, stateful.ConsoleSink().Spec())
	if s, ok := steps[len(steps)-1].(*selectStep); !ok || s.inPlace {
		t.Errorf("the last step is %T (in place: %v); want a select after dropDuplicates that makes new rows", steps[len(steps)-1], ok && s.inPlace)
	}
}

// TestEqualityWithNullIsNull: == and != with a null operand have no value, as in SQL (and on
// Spark): a filter drops the row, a select yields null; || and && treat it as SQL's unknown.
func TestEqualityWithNullIsNull(t *testing.T) {
	cols := []v1.Column{querytest.Col("id", v1.TypeString), querytest.Col("n", v1.TypeLong)}
	rows := func() []Row { return []Row{{"a", int64(3)}, {"b", int64(4)}, {nil, nil}} }
	filter := benchSteps(t, querytest.Make("q", "default").FilesSource("in", "/in", v1.FormatJSON, cols...).
		Filter("n != 3 || id == 'x'").ConsoleSink().Spec())
	got, err := filter[0].process(&stepBatch{}, rows())
	if err != nil {
		t.Fatal(err)
	}
	if want := []Row{{"b", int64(4)}}; !cmp.Equal(want, got) {
		t.Errorf("filter n != 3 || id == 'x' kept %v, want %v", got, want)
	}
	sel := benchSteps(t, querytest.Make("q", "default").FilesSource("in", "/in", v1.FormatJSON, cols...).
		Select(querytest.As("eq", "n == 3"), querytest.As("ne", "id != 'a'"), querytest.As("or", "n == 3 || true"),
			querytest.As("and", "n == 3 && false"), querytest.As("not", "!(n == 3)")).ConsoleSink().Spec())
	got, err = sel[0].process(&stepBatch{}, rows())
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{{true, false, true, false, false}, {false, true, true, false, true}, {nil, nil, true, false, nil}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("select (-want +got):\n%s", diff)
	}
}
