package state_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine/state"
)

func dir(t testing.TB) checkpoint.Store {
	t.Helper()
	d, err := checkpoint.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func meta(op string) state.Metadata {
	return state.Metadata{
		Operator:    op,
		Kind:        "aggregate",
		KeySchema:   []state.Field{{Name: "k", Type: "string"}},
		ValueSchema: []state.Field{{Name: "n", Type: "long", Function: "count"}},
		Fingerprint: state.Fingerprint([]byte(`{"count":"*"}`)),
	}
}

func open(t testing.TB, cs checkpoint.Store, opts state.Options) *state.Store {
	t.Helper()
	if opts.Partitions == 0 {
		opts.Partitions = 4
	}
	st, err := state.Open(t.Context(), cs, meta("agg"), opts)
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// apply makes the changes of one batch: puts of k=v and deletes of k (v == "").
func apply(t testing.TB, st *state.Store, changes map[string]string) {
	t.Helper()
	err := st.Update(func(p *state.Partition) error {
		for k, v := range changes {
			if state.PartitionOf([]byte(k), st.Partitions()) != p.ID() {
				continue
			}
			if v == "" {
				p.Delete(k)
			} else {
				p.Put(k, []byte(v))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update() error = %v", err)
	}
}

func contents(st *state.Store) map[string]string {
	m := map[string]string{}
	for i := range st.Partitions() {
		for k, v := range st.Partition(i).All() {
			m[k] = string(v)
		}
	}
	return m
}

// randomBatches makes n batches of changes over a small key space, and the
// expected contents after each (want[v] is version v, the state after batch
// v-1).
func randomBatches(n, keys int) (batches []map[string]string, want []map[string]string) {
	rng := rand.New(rand.NewPCG(1, 2))
	cur := map[string]string{}
	want = append(want, maps.Clone(cur))
	for b := range n {
		ch := map[string]string{}
		for range 1 + rng.IntN(keys) {
			k := fmt.Sprintf("key-%d", rng.IntN(keys))
			if rng.IntN(4) == 0 {
				ch[k] = ""
				delete(cur, k)
			} else {
				ch[k] = fmt.Sprintf("v%d-%d", b, rng.IntN(100))
				cur[k] = ch[k]
			}
		}
		batches = append(batches, ch)
		want = append(want, maps.Clone(cur))
	}
	return batches, want
}

func TestCommitLoad(t *testing.T) { testCommitLoad(t, dir(t)) }

// testCommitLoad commits random batches and loads the newest version back.
func testCommitLoad(t *testing.T, cs checkpoint.Store) {
	batches, want := randomBatches(25, 40)
	st := open(t, cs, state.Options{SnapshotEvery: 4})
	if err := st.Load(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	for b, ch := range batches {
		apply(t, st, ch)
		cm, err := st.Commit(t.Context())
		if err != nil {
			t.Fatalf("Commit() batch %d error = %v", b, err)
		}
		if cm.Version != int64(b+1) || cm.Rows != int64(len(want[b+1])) {
			t.Fatalf("Commit() batch %d = %+v, want version %d with %d rows", b, cm, b+1, len(want[b+1]))
		}
	}
	st.Close()
	re := open(t, cs, state.Options{SnapshotEvery: 4})
	if err := re.Load(t.Context(), int64(len(batches))); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[len(batches)], contents(re)); diff != "" {
		t.Fatalf("Load(%d) contents (-want +got):\n%s", len(batches), diff)
	}
	keys, _ := checkpoint.ListKeys(t.Context(), cs, "state/agg/")
	if !strings.Contains(strings.Join(keys, " "), ".snapshot") {
		t.Errorf("no snapshot written after %d versions: %v", len(batches), keys)
	}
}

func TestLoadEveryVersion(t *testing.T) {
	cs := dir(t)
	batches, want := randomBatches(30, 30)
	st := open(t, cs, state.Options{SnapshotEvery: 3, Partitions: 3})
	if err := st.Load(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	for _, ch := range batches {
		apply(t, st, ch)
		if _, err := st.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	// Loading an old version deletes the newer files, so go from newest down.
	for v := len(batches); v >= 0; v-- {
		re := open(t, cs, state.Options{SnapshotEvery: 3, Partitions: 3})
		if err := re.Load(t.Context(), int64(v)); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want[v], contents(re)); diff != "" {
			t.Fatalf("Load(%d) contents (-want +got):\n%s", v, diff)
		}
		re.Close()
	}
}

// A batch that wrote state and died before its commit runs again: Load
// drops its files and the replay writes the version anew.
func TestReplayAfterUncommittedVersion(t *testing.T) {
	cs := dir(t)
	st := open(t, cs, state.Options{})
	ctx := t.Context()
	if err := st.Load(ctx, 0); err != nil {
		t.Fatal(err)
	}
	apply(t, st, map[string]string{"a": "1", "b": "1"})
	if _, err := st.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	apply(t, st, map[string]string{"a": "crashed", "c": "crashed"})
	if _, err := st.Commit(ctx); err != nil { // version 2, never committed by the engine
		t.Fatal(err)
	}
	st.Close()

	re := open(t, cs, state.Options{})
	if err := re.Load(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"a": "1", "b": "1"}, contents(re)); diff != "" {
		t.Fatalf("Load(1) (-want +got):\n%s", diff)
	}
	apply(t, re, map[string]string{"b": "2"})
	if _, err := re.Commit(ctx); err != nil {
		t.Fatalf("Commit() of the replayed version error = %v", err)
	}
	re.Close()
	last := open(t, cs, state.Options{})
	if err := last.Load(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"a": "1", "b": "2"}, contents(last)); diff != "" {
		t.Fatalf("Load(2) (-want +got):\n%s", diff)
	}
}

func TestCommitFenced(t *testing.T) {
	cs := dir(t)
	ctx := t.Context()
	one, two := open(t, cs, state.Options{Partitions: 1}), open(t, cs, state.Options{Partitions: 1})
	for _, st := range []*state.Store{one, two} {
		if err := st.Load(ctx, 0); err != nil {
			t.Fatal(err)
		}
		apply(t, st, map[string]string{"a": "1"})
	}
	if _, err := one.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := two.Commit(ctx); !errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("second Commit() error = %v, want ErrFenced", err)
	}
	if err := two.Update(func(*state.Partition) error { return nil }); err == nil {
		t.Fatal("Update() after a failed Commit succeeded, want an error until Load")
	}
}

func TestPurgeKeepsLoadable(t *testing.T) {
	cs := dir(t)
	ctx := t.Context()
	batches, want := randomBatches(60, 20)
	st := open(t, cs, state.Options{SnapshotEvery: 4, Partitions: 2})
	if err := st.Load(ctx, 0); err != nil {
		t.Fatal(err)
	}
	for _, ch := range batches {
		apply(t, st, ch)
		if _, err := st.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	before, _ := cs.List(ctx, "state/")
	if err := checkpoint.PurgeState(ctx, cs, 50); err != nil {
		t.Fatal(err)
	}
	after, _ := cs.List(ctx, "state/")
	if len(after) >= len(before) || len(after) > 2*(60-50+3*4)+1 {
		t.Errorf("PurgeState kept %d of %d files, want a few per partition", len(after), len(before))
	}
	for _, v := range []int64{60, 55, 50} {
		re := open(t, cs, state.Options{SnapshotEvery: 4, Partitions: 2})
		if err := re.Load(ctx, v); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want[v], contents(re)); diff != "" {
			t.Fatalf("Load(%d) after purge (-want +got):\n%s", v, diff)
		}
		re.Close()
	}
}

func TestOpenIncompatible(t *testing.T) {
	cs := dir(t)
	ctx := t.Context()
	if _, err := state.Open(ctx, cs, meta("agg"), state.Options{Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	other := meta("agg")
	other.Fingerprint = state.Fingerprint([]byte(`{"sum":"x"}`))
	for name, tc := range map[string]struct {
		m    state.Metadata
		opts state.Options
	}{
		"fingerprint": {other, state.Options{Partitions: 4}},
		"partitions":  {meta("agg"), state.Options{Partitions: 8}},
		"kind":        {func() state.Metadata { m := meta("agg"); m.Kind = "dropDuplicates"; return m }(), state.Options{Partitions: 4}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := state.Open(ctx, cs, tc.m, tc.opts); !errors.Is(err, state.ErrIncompatible) {
				t.Fatalf("Open() error = %v, want ErrIncompatible", err)
			}
		})
	}
	st, err := state.Open(ctx, cs, meta("agg"), state.Options{Partitions: 4})
	if err != nil {
		t.Fatalf("Open() with the same metadata error = %v", err)
	}
	st.Close()
}

func TestFileCorrupt(t *testing.T) {
	data := state.EncodeFile(state.FileHeader{Kind: checkpoint.StateDelta, Version: 7, Partition: 2, Rows: 1},
		[]state.Record{{Key: "a", Value: []byte("x")}, {Key: "b", Remove: true}})
	var got []state.Record
	h, err := state.DecodeFile(data, func(r state.Record) { got = append(got, r) })
	if err != nil {
		t.Fatal(err)
	}
	want := []state.Record{{Key: "a", Value: []byte("x")}, {Key: "b", Remove: true}}
	if diff := cmp.Diff(want, got); diff != "" || h.Version != 7 || h.Partition != 2 || h.Records != 2 {
		t.Fatalf("DecodeFile() = %+v, %v (-want +got):\n%s", h, got, diff)
	}
	for i := range data {
		bad := append([]byte(nil), data...)
		bad[i] ^= 0x10
		if _, err := state.DecodeFile(bad, func(state.Record) {}); !errors.Is(err, state.ErrCorrupt) {
			t.Fatalf("DecodeFile() with byte %d flipped error = %v, want ErrCorrupt", i, err)
		}
	}
	if _, err := state.DecodeFile(data[:len(data)-1], func(state.Record) {}); !errors.Is(err, state.ErrCorrupt) {
		t.Fatalf("DecodeFile() truncated error = %v, want ErrCorrupt", err)
	}
}

func TestDescribe(t *testing.T) {
	cs := dir(t)
	ctx := context.Background()
	st := open(t, cs, state.Options{Partitions: 2, SnapshotEvery: 2})
	if err := st.Load(ctx, 0); err != nil {
		t.Fatal(err)
	}
	batches, want := randomBatches(9, 30)
	for _, ch := range batches {
		apply(t, st, ch)
		if _, err := st.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	sums, err := state.Describe(ctx, cs, -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 1 || sums[0].Operator != "agg" || sums[0].Kind != "aggregate" || sums[0].Partitions != 2 ||
		sums[0].Rows != int64(len(want[9])) || sums[0].Version != 9 || sums[0].Deltas == 0 || sums[0].Bytes == 0 {
		t.Fatalf("Describe() = %+v, want agg at version 9 with %d rows", sums, len(want[9]))
	}
	sums, err = state.Describe(ctx, cs, 4)
	if err != nil {
		t.Fatal(err)
	}
	if sums[0].Rows != int64(len(want[4])) {
		t.Fatalf("Describe(4) rows = %d, want %d", sums[0].Rows, len(want[4]))
	}
}

func TestUpdatePairedRefusesStoresOfOtherPartitions(t *testing.T) {
	cs := dir(t)
	a := open(t, cs, state.Options{Partitions: 4})
	m := meta("other")
	b, err := state.Open(t.Context(), cs, m, state.Options{Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	for _, st := range []*state.Store{a, b} {
		if err := st.Load(t.Context(), 0); err != nil {
			t.Fatal(err)
		}
	}
	called := false
	err = state.UpdatePaired(a, b, func(pa, pb *state.Partition) error { called = true; return nil })
	if err == nil || called {
		t.Errorf("UpdatePaired() of 4 and 2 partitions: error = %v, called = %v; want an error before any call", err, called)
	}
}
