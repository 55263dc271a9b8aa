package engine_test

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
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
