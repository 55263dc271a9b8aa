package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/engine/state"
)

// adEvents are two folders of JSON files, impressions and clicks, for
// stream–stream join queries, written one file per batch and side.
type adEvents struct {
	imps, clicks, out, ckpt string
	files                   int
}

func newAdEvents(t *testing.T) *adEvents {
	t.Helper()
	return &adEvents{imps: t.TempDir(), clicks: t.TempDir(), out: t.TempDir(), ckpt: filepath.Join(t.TempDir(), "ckpt")}
}

type adEvent struct {
	ad  string
	sec int // event time, seconds after eventT0
	// user of an impression, cost of a click
	user string
	cost float64
}

// add writes one file of impressions and one of clicks (either may be
// empty), newer than the ones before.
func (e *adEvents) add(t *testing.T, imps, clicks []adEvent) {
	t.Helper()
	write := func(dir string, lines []string) {
		p := filepath.Join(dir, fmt.Sprintf("part-%04d.json", e.files))
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		at := eventT0.Add(time.Duration(e.files) * time.Second)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	var li, lc []string
	for _, ev := range imps {
		li = append(li, fmt.Sprintf(`{"ad_id":%q,"user":%q,"imp_ts":%q}`, ev.ad, ev.user, eventT0.Add(time.Duration(ev.sec)*time.Second).Format(time.RFC3339)))
	}
	for _, ev := range clicks {
		lc = append(lc, fmt.Sprintf(`{"ad_id":%q,"click_ts":%q,"cost":%g}`, ev.ad, eventT0.Add(time.Duration(ev.sec)*time.Second).Format(time.RFC3339), ev.cost))
	}
	write(e.imps, li)
	write(e.clicks, lc)
	e.files++
}

// query is a left outer join of impressions with the clicks on the same ad
// up to 30s later, both sides watermarked 5s behind.
func (e *adEvents) query() *querytest.Query {
	one := func(s *v1.Source) { s.Files.MaxFilesPerTrigger = new(int32(1)) }
	return querytest.Make("ad-clicks", "ads").
		FilesSource("impressions", e.imps, v1.FormatJSON,
			querytest.Col("ad_id", v1.TypeString), querytest.Col("user", v1.TypeString), querytest.Col("imp_ts", v1.TypeTimestamp)).
		FilesSource("clicks", e.clicks, v1.FormatJSON,
			querytest.Col("ad_id", v1.TypeString), querytest.Col("click_ts", v1.TypeTimestamp), querytest.Col("cost", v1.TypeDouble)).
		EditSource("impressions", one).EditSource("clicks", one).
		Watermark("imp_ts", "5s").
		Join(v1.Join{
			Name:   "ad-clicks",
			Type:   v1.JoinLeftOuter,
			Keys:   querytest.Keys("ad_id", "ad_id"),
			Stream: querytest.StreamSide("clicks", "imp_ts", "click_ts", "5s", "0s", "30s"),
			Select: []v1.JoinColumn{
				{Side: v1.SideLeft, Column: "ad_id"}, {Side: v1.SideLeft, Column: "user"}, {Side: v1.SideLeft, Column: "imp_ts"},
				{Side: v1.SideRight, Column: "click_ts"}, {Side: v1.SideRight, Column: "cost"},
			},
		}).
		OutputMode(v1.OutputAppend).
		FilesSink(e.out, v1.FormatJSON).
		StatePartitions(4).
		AvailableNow().
		Checkpoint(e.ckpt)
}

func (e *adEvents) output(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, r := range enginetest.OutputRowsAt(t, e.out) {
		out = append(out, fmt.Sprint(r))
	}
	sort.Strings(out)
	return out
}

// adStream is the input of the join tests, a file per side and batch.
var adStream = [][2][]adEvent{
	{{{ad: "a", sec: 0, user: "u1"}, {ad: "b", sec: 2, user: "u2"}}, {{ad: "a", sec: 10, cost: 1}}},
	{{{ad: "c", sec: 20, user: "u3"}}, {{ad: "a", sec: 31, cost: 2}, {ad: "c", sec: 25, cost: 3}}},
	{{{ad: "a", sec: 40, user: "u4"}}, {{ad: "c", sec: 45, cost: 4}}},
	// Far ahead on both sides: the watermark passes every bound above.
	{{{ad: "z", sec: 500, user: "u9"}}, {{ad: "y", sec: 500, cost: 9}}},
}

// newAdStream is adEvents holding the whole adStream.
func newAdStream(t *testing.T) *adEvents {
	t.Helper()
	e := newAdEvents(t)
	for _, b := range adStream {
		e.add(t, b[0], b[1])
	}
	return e
}

// runDone runs obj to its end, which must be its trigger's.
func runDone(t *testing.T, obj *v1.StreamingQuery) {
	t.Helper()
	if sum := run(t, obj); sum.Reason != engine.StopTriggerDone {
		t.Fatalf("Summary = %+v", sum)
	}
}

// adTime is the printed event time sec seconds after eventT0, as the output shows it.
func adTime(sec int) string { return eventT0.Add(time.Duration(sec) * time.Second).String() }

func TestStreamJoinLeftOuterQuery(t *testing.T) {
	e := newAdStream(t)
	runDone(t, e.query().Obj())
	want := []string{
		fmt.Sprint([]any{"a", "u1", adTime(0), adTime(10), 1.0}),
		fmt.Sprint([]any{"b", "u2", adTime(2), nil, nil}), // no click: emitted once, with nulls
		fmt.Sprint([]any{"c", "u3", adTime(20), adTime(25), 3.0}),
		fmt.Sprint([]any{"c", "u3", adTime(20), adTime(45), 4.0}),
		fmt.Sprint([]any{"a", "u4", adTime(40), nil, nil}), // the click at 31s came before it
	}
	sort.Strings(want)
	// The click at 31s is 31s after the impression at 0s: outside the bound.
	if diff := cmp.Diff(want, e.output(t)); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}

	// The checkpoint shows each side's state and watermark.
	ck := enginetest.LoadCheckpoint(t, e.ckpt)
	d, err := ck.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sums, err := state.Describe(context.Background(), ck.Store(), *d.CommittedBatch+1)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]int64{}
	for _, s := range sums {
		rows[s.Operator] = s.Rows
		if s.Kind != "join" {
			t.Errorf("state operator %s has kind %q, want join", s.Operator, s.Kind)
		}
	}
	// Only the rows at 500s are still buffered.
	if diff := cmp.Diff(map[string]int64{"ad-clicks.left": 1, "ad-clicks.right": 1}, rows); diff != "" {
		t.Errorf("state rows per side (-want +got):\n%s", diff)
	}
	wm := eventT0.Add(495 * time.Second).UnixMilli()
	if diff := cmp.Diff(map[string]int64{"ad-clicks.left": wm, "ad-clicks.right": wm}, d.Committed.WatermarksMs); diff != "" {
		t.Errorf("commit watermarksMs (-want +got):\n%s", diff)
	}
}

// TestStreamJoinQueryResumes runs the join over the stream in three runs,
// files added between them, and compares with the uninterrupted run: each
// side's watermark and buffered rows carry over.
func TestStreamJoinQueryResumes(t *testing.T) {
	whole := newAdStream(t)
	run(t, whole.query().Obj())

	parts := newAdEvents(t)
	for i, b := range adStream {
		parts.add(t, b[0], b[1])
		if i%2 == 1 || i == len(adStream)-1 {
			run(t, parts.query().Obj())
		}
	}
	if diff := cmp.Diff(whole.output(t), parts.output(t)); diff != "" {
		t.Errorf("output of three runs (-uninterrupted +resumed):\n%s", diff)
	}
}

// joinThenCount is Nexmark q4's shape on the ad events: join impressions with their clicks,
// then count the clicks and sum their cost per ad per minute of impression time.
func (e *adEvents) joinThenCount() *querytest.Query {
	q := e.query()
	return q.Edit(func(s *v1.StreamingQuerySpec) {
		s.Transform[1].Join.Type = v1.JoinInner
	}).Aggregate("per-ad", []v1.GroupKey{querytest.Key("ad_id"), querytest.Window("imp_ts", "1m")},
		v1.Aggregation{Name: "clicks", Function: v1.AggCount},
		v1.Aggregation{Name: "spend", Function: v1.AggSum, Column: "cost"})
}

// TestStreamJoinThenAggregate: a windowed aggregation after a stream join, in append mode.
// The join emits an impression up to its time bound (30s) behind the watermark, so the
// aggregation closes a window only when the watermark is that much past it.
func TestStreamJoinThenAggregate(t *testing.T) {
	e := newAdStream(t)
	runDone(t, e.joinThenCount().Obj())
	// a: the click at 10s (the one at 31s is out of the impression's bound);
	// c: the clicks at 25s and 45s; b and the second a had none.
	want := []string{
		fmt.Sprint([]any{"a", adTime(0), adTime(60), int64(1), 1.0}),
		fmt.Sprint([]any{"c", adTime(0), adTime(60), int64(2), 7.0}),
	}
	if diff := cmp.Diff(want, e.output(t)); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}

	// A click found after the watermark passed its impression's time: the join emits the
	// impression behind the watermark, and the aggregation must not drop it as late.
	slow := newAdEvents(t)
	for _, b := range [][2][]adEvent{
		{{{ad: "d", sec: 100, user: "u5"}}, {{ad: "x", sec: 90}}},
		{{{ad: "e", sec: 200, user: "u6"}}, {{ad: "q", sec: 126}}}, // watermark: min(195, 121)
		{nil, {{ad: "d", sec: 125, cost: 5}}},                      // d@100 matches, 21s behind it
		{{{ad: "z", sec: 900, user: "u9"}}, {{ad: "y", sec: 900}}},
	} {
		slow.add(t, b[0], b[1])
	}
	run(t, slow.joinThenCount().Obj())
	if diff := cmp.Diff([]string{fmt.Sprint([]any{"d", adTime(60), adTime(120), int64(1), 5.0})}, slow.output(t)); diff != "" {
		t.Errorf("output of a late-found match (-want +got):\n%s", diff)
	}

	// The same, run as three runs that each resume from the checkpoint.
	parts := newAdEvents(t)
	for i, b := range adStream {
		parts.add(t, b[0], b[1])
		if i%2 == 1 || i == len(adStream)-1 {
			run(t, parts.joinThenCount().Obj())
		}
	}
	if diff := cmp.Diff(want, parts.output(t)); diff != "" {
		t.Errorf("output of three runs (-want +got):\n%s", diff)
	}
}

// TestStreamJoinThenAggregateWatermark: the steps after a stream join close windows by the
// watermark the join propagates, as Spark's does: the smaller of both sides' state watermarks,
// each its bound behind and 1 ms below it (the bound is inclusive). Here the clicks may come up
// to 30s before their impression (lowerBound 30s, upperBound 0s), so a window closes once the
// watermark is more than 30s past its end, not at its end.
func TestStreamJoinThenAggregateWatermark(t *testing.T) {
	e := newAdEvents(t)
	query := func() *querytest.Query {
		return e.joinThenCount().Edit(func(s *v1.StreamingQuerySpec) {
			s.Transform[1].Join.Stream.TimeBound.LowerBound = "30s"
			s.Transform[1].Join.Stream.TimeBound.UpperBound = "0s"
		})
	}
	e.add(t, []adEvent{{ad: "a", sec: 10, user: "u1"}}, []adEvent{{ad: "a", sec: 5, cost: 1}})
	e.add(t, []adEvent{{ad: "z", sec: 70, user: "u9"}}, []adEvent{{ad: "y", sec: 70}})
	e.add(t, []adEvent{{ad: "z", sec: 95, user: "u9"}}, []adEvent{{ad: "y", sec: 95}})
	run(t, query().Obj()) // the watermark ends at 90s: [0s, 60s) is exactly 30s behind it
	if got := e.output(t); len(got) != 0 {
		t.Errorf("output with the watermark 30s past the window = %v, want none", got)
	}
	e.add(t, []adEvent{{ad: "z", sec: 96, user: "u9"}}, []adEvent{{ad: "y", sec: 96}})
	run(t, query().Obj()) // 91s
	if diff := cmp.Diff([]string{fmt.Sprint([]any{"a", adTime(0), adTime(60), int64(1), 1.0})}, e.output(t)); diff != "" {
		t.Errorf("output with the watermark 31s past the window (-want +got):\n%s", diff)
	}
}

// TestImpressionsClicksExample runs examples/queries/impressions-clicks.yaml
// on its bundled data.
func TestImpressionsClicksExample(t *testing.T) {
	obj := querytest.Load(t, "../examples/queries/impressions-clicks.yaml")
	out := t.TempDir()
	for i, dir := range []string{"impressions", "clicks"} {
		obj.Spec.Sources[i].Files.Path = "../examples/queries/data/" + dir
	}
	obj.Spec.Sink.Files.Path = out
	sum := run(t, obj, engine.WithCheckpoint(filepath.Join(t.TempDir(), "ckpt")))
	if sum.Batches != 3 || sum.NumInputRows != 10 || sum.NumOutputRows != 5 {
		t.Errorf("Summary = %+v, want 3 batches, 10 rows in, 5 out", sum)
	}
	var users []string
	for _, r := range enginetest.OutputRowsAt(t, out) {
		users = append(users, fmt.Sprintf("%s clicked=%t", r[1], r[3] != nil))
	}
	sort.Strings(users)
	// u-100 twice: the click at 10:03 comes in batch 1, behind its watermark
	// (10:04) but not behind batch 0's, its late-event watermark.
	want := []string{"u-100 clicked=true", "u-100 clicked=true", "u-101 clicked=true", "u-102 clicked=false", "u-103 clicked=false"}
	if diff := cmp.Diff(want, users); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

// TestStreamJoinFullOuterAndLeftSemiQueries runs the join of adStream as a
// full outer join (unmatched rows of both sides once, at eviction) and as a
// left semi join (each impression with a click once, its columns only).
func TestStreamJoinFullOuterAndLeftSemiQueries(t *testing.T) {
	cases := []struct {
		typ        v1.JoinType
		selectCols []v1.JoinColumn
		want       []string
	}{
		{
			typ: v1.JoinFullOuter,
			selectCols: []v1.JoinColumn{
				{Side: v1.SideLeft, Column: "ad_id"}, {Side: v1.SideLeft, Column: "user"}, {Side: v1.SideLeft, Column: "imp_ts"},
				{Side: v1.SideRight, Column: "ad_id", Name: "click_ad"}, {Side: v1.SideRight, Column: "click_ts"}, {Side: v1.SideRight, Column: "cost"},
			},
			want: []string{
				fmt.Sprint([]any{"a", "u1", adTime(0), "a", adTime(10), 1.0}),
				fmt.Sprint([]any{"b", "u2", adTime(2), nil, nil, nil}),
				fmt.Sprint([]any{nil, nil, nil, "a", adTime(31), 2.0}), // no impression in [1s, 31s]
				fmt.Sprint([]any{"c", "u3", adTime(20), "c", adTime(25), 3.0}),
				fmt.Sprint([]any{"c", "u3", adTime(20), "c", adTime(45), 4.0}),
				fmt.Sprint([]any{"a", "u4", adTime(40), nil, nil, nil}),
			},
		},
		{
			typ: v1.JoinLeftSemi,
			want: []string{
				fmt.Sprint([]any{"a", "u1", adTime(0)}),
				fmt.Sprint([]any{"c", "u3", adTime(20)}), // two clicks, one row
			},
		},
	}
	for _, tc := range cases {
		t.Run(string(tc.typ), func(t *testing.T) {
			e := newAdStream(t)
			q := e.query().Edit(func(s *v1.StreamingQuerySpec) {
				j := s.Transform[1].Join
				j.Type, j.Select = tc.typ, tc.selectCols
			})
			runDone(t, q.Obj())
			want := slices.Clone(tc.want)
			sort.Strings(want)
			if diff := cmp.Diff(want, e.output(t)); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStreamJoinRightTransform filters and projects the clicks before the
// join: only the clicks that pass reach the right watermark and the join,
// with the columns the select made.
func TestStreamJoinRightTransform(t *testing.T) {
	e := newAdStream(t)
	q := e.query().Edit(func(s *v1.StreamingQuerySpec) {
		j := s.Transform[1].Join
		j.Type = v1.JoinInner
		j.Stream.Transform = []v1.SideStep{
			{Filter: "cost >= 2.0"},
			{Select: []v1.Projection{querytest.As("ad_id", "ad_id"), querytest.As("click_ts", "click_ts"), querytest.As("cents", "int(cost * 100.0)")}},
		}
		j.Select = []v1.JoinColumn{{Side: v1.SideLeft, Column: "user"}, {Side: v1.SideRight, Column: "click_ts"}, {Side: v1.SideRight, Column: "cents"}}
	})
	runDone(t, q.Obj())
	// The click of cost 1 at 10s is filtered out: u1 has no match.
	want := []string{
		fmt.Sprint([]any{"u3", adTime(25), int64(300)}),
		fmt.Sprint([]any{"u3", adTime(45), int64(400)}),
	}
	if diff := cmp.Diff(want, e.output(t)); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}
