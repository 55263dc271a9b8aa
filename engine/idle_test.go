package engine_test

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/engine/sink"
	"github.com/lockstep-dev/lockstep/engine/source"
)

// idleRecorder is an IdleObserver that sends the time of every idle trigger.
type idleRecorder struct {
	*enginetest.Recorder
	idle chan time.Time
}

func (r idleRecorder) Idle(at time.Time) { r.idle <- at }

// TestIdleObserverToldOfEmptyTriggers: a trigger that finds no new data tells an IdleObserver,
// and a trigger that runs a batch does not (it is told Committed).
func TestIdleObserverToldOfEmptyTriggers(t *testing.T) {
	o := newOrders(t)
	o.add(t, 2)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC))
	rec := idleRecorder{Recorder: enginetest.NewRecorder(), idle: make(chan time.Time, 16)}
	q := newQuery(t, o.query().Obj(), engine.WithClock(clk), engine.WithObserver(rec), engine.WithIdlePoll(time.Second))
	result := runAsync(t, q)
	if p := rec.Next(t, wait); p.Batch != 0 {
		t.Fatalf("batch %d committed, want 0", p.Batch)
	}
	select {
	case at := <-rec.idle:
		if !at.Equal(clk.Now()) {
			t.Errorf("Idle(%s), want the clock's time %s", at, clk.Now())
		}
	case <-time.After(wait):
		t.Fatal("no Idle after the data ran out")
	}
	enginetest.Step(t, clk, time.Second, wait)
	select {
	case <-rec.idle:
	case <-time.After(wait):
		t.Fatal("no Idle after the next poll")
	}
	q.Stop()
	if sum, err := result(); err != nil || sum.Batches != 1 {
		t.Fatalf("Run = %+v, %v; want stopped after 1 batch", sum, err)
	}
}

// wakingFiles is the files source with the Wake the engine gave it.
type wakingFiles struct {
	wake chan func()
}

func (w wakingFiles) registry(t *testing.T) *engine.Registry {
	t.Helper()
	reg := engine.NewRegistry()
	newFiles := func(ctx context.Context, spec *v1.Source, env engine.SourceEnv) (engine.Source, error) {
		w.wake <- env.Wake
		return source.NewFiles(ctx, spec, env)
	}
	for _, err := range []error{
		reg.RegisterSource(v1.SourceFiles, source.FilesSpec(), newFiles),
		reg.RegisterSink(v1.SinkFiles, sink.FilesSpec(), sink.NewFiles),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

// TestWakeEndsTheIdlePoll: with the default trigger, a source's Wake makes an
// idle query plan at once; the clock, and so the idle poll, never moves.
func TestWakeEndsTheIdlePoll(t *testing.T) {
	o := newOrders(t)
	o.add(t, 1)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC))
	rec := idleRecorder{Recorder: enginetest.NewRecorder(), idle: make(chan time.Time, 16)}
	w := wakingFiles{wake: make(chan func(), 1)}
	q, err := engine.New(o.query().Obj(), w.registry(t), engine.WithClock(clk), engine.WithObserver(rec), engine.WithIdlePoll(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	result := runAsync(t, q)
	wake := <-w.wake
	if p := rec.Next(t, wait); p.Batch != 0 {
		t.Fatalf("batch %d committed, want 0", p.Batch)
	}
	select {
	case <-rec.idle:
	case <-time.After(wait):
		t.Fatal("no Idle after the data ran out")
	}
	o.add(t, 1)
	wake()
	wake() // folded into the same wake-up
	if p := rec.Next(t, wait); p.Batch != 1 || p.NumInputRows != 3 {
		t.Fatalf("batch %d of %d rows committed, want batch 1 of 3", p.Batch, p.NumInputRows)
	}
	q.Stop()
	if sum, err := result(); err != nil || sum.Batches != 2 {
		t.Fatalf("Run = %+v, %v; want stopped after 2 batches", sum, err)
	}
	o.check(t)
}
