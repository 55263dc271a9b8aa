package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/controller"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestProgressEvents: a query whose checkpoint records, batch after batch, a growing lag and
// batches longer than its 1s trigger interval gets a BatchesSlow Warning after
// SlowBatchesInARow batches and a LagGrowing Warning after LagGrowthBatches. The batches are
// written as the engine writes them, each once the status shows the previous one, so that
// the controller sees every commit.
func TestProgressEvents(t *testing.T) {
	f := newFixture(t, testenv.ControlPlane(t))
	f.startManager(nil)
	f.create(f.query("behind").ProcessingTime("1s").Obj())
	q := f.get("behind")
	ctx := context.Background()
	cp := f.claim(q, 0)
	now := time.Now()
	for b := range int64(controller.LagGrowthBatches + 1) {
		end := json.RawMessage(fmt.Sprintf(`{"files":%d}`, b+1))
		if err := cp.AddOffsets(ctx, checkpoint.Offsets{BatchID: b, BatchTimestampMs: now.UnixMilli(),
			Sources: []checkpoint.SourceOffset{{Source: "orders", Offset: end}}}); err != nil {
			t.Fatal(err)
		}
		lag := 100 * (b + 1)
		if err := cp.AddCommit(ctx, checkpoint.Commit{BatchID: b, Progress: checkpoint.Progress{
			Timestamp: now, NumInputRows: 10, NumOutputRows: 10,
			DurationMs: map[string]int64{"triggerExecution": 1500},
			Sources:    []checkpoint.SourceProgress{{Source: "orders", EndOffset: end, NumInputRows: 10, Lag: &lag}},
		}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, fmt.Sprintf("the status shows batch %d", b), func() error {
			if p := f.get("behind").Status.LastProgress; p == nil || p.Batch != b {
				return fmt.Errorf("lastProgress %+v", p)
			}
			return nil
		})
	}
	slow := f.event("behind", controller.EventBatchesSlow)
	if slow.Type != corev1.EventTypeWarning || !strings.Contains(slow.Note, "3 batches in a row took longer than the trigger interval 1s") {
		t.Errorf("BatchesSlow event = %s %q", slow.Type, slow.Note)
	}
	growing := f.event("behind", controller.EventLagGrowing)
	if growing.Type != corev1.EventTypeWarning || !strings.Contains(growing.Note, "Lag grew for 5 batches in a row, to 600 records at batch 5") {
		t.Errorf("LagGrowing event = %s %q", growing.Type, growing.Note)
	}
}
