package controller

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Thresholds of the Events that explain a query falling behind. docs/observability.md
// states them.
const (
	// LagGrowthBatches is how many batches in a row the lag (records, summed over the
	// sources) must grow for a LagGrowing Warning.
	LagGrowthBatches = 5
	// SlowBatchesInARow is how many committed batches in a row must take longer than the
	// processingTime trigger's interval for a BatchesSlow Warning.
	SlowBatchesInARow = 3
)

// Event reasons of progress trends.
const (
	EventLagGrowing  = "LagGrowing"
	EventBatchesSlow = "BatchesSlow"
)

// trend is what the controller remembers of one query's commits, to tell a trend from one
// batch. It sees the commits a status poll sees: every one when batches are a second or more
// apart, else a sample (see poll.go), so a streak is counted in batch ids between the commits
// it saw — lag that grew from batch 10 to batch 13 grew for 3 batches — and slow batches in
// the commits it saw.
type trend struct {
	batch int64 // the newest commit folded in; -1 for none
	lag   *int64
	// growing counts the batches the lag grew over in a row; slow the seen commits in a row
	// slower than the trigger interval.
	growing, slow streak
}

// streak counts the batches in a row of one condition, and whether it has had its Event.
type streak struct {
	n      int64
	warned bool
}

// extend adds n batches to the streak when on, else ends it, and reports whether the streak
// has just reached at: the one time its Event is due.
func (s *streak) extend(on bool, n, at int64) bool {
	if !on {
		*s = streak{}
		return false
	}
	s.n += n
	if s.n >= at && !s.warned {
		s.warned = true
		return true
	}
	return false
}

// commitSeen is what the trend needs of a commit.
type commitSeen struct {
	batch int64
	// lag is the records beyond the batch summed over the sources; nil when no source can tell.
	lag      *int64
	duration time.Duration
}

// fold adds a commit newer than the last one folded in, for a query whose trigger fires
// every interval (0: no interval), and returns the Warnings the commit starts: one per streak
// that reaches its threshold. A commit that is not newer (the same poll again, a checkpoint
// started afresh) only resets the memory.
func (t *trend) fold(c commitSeen, interval time.Duration) []event {
	if c.batch <= t.batch {
		*t = trend{batch: c.batch, lag: c.lag}
		return nil
	}
	var events []event
	grew := t.lag != nil && c.lag != nil && *c.lag > *t.lag && t.batch >= 0
	if t.growing.extend(grew, c.batch-t.batch, LagGrowthBatches) {
		events = append(events, event{corev1.EventTypeWarning, EventLagGrowing, "Progress", fmt.Sprintf(
			"Lag grew for %d batches in a row, to %d records at batch %d: the sources receive more than the query processes; raise the rate limit (maxOffsetsPerTrigger, maxFilesPerTrigger) or the resources, or look at the slowest phase of its batches",
			t.growing.n, *c.lag, c.batch)})
	}
	if t.slow.extend(interval > 0 && c.duration > interval, 1, SlowBatchesInARow) {
		events = append(events, event{corev1.EventTypeWarning, EventBatchesSlow, "Progress", fmt.Sprintf(
			"%d batches in a row took longer than the trigger interval %s (batch %d: %s): the next batch starts late and the query falls behind; lengthen the interval, lower the rate limit or give the engine more resources",
			t.slow.n, interval, c.batch, c.duration.Round(time.Millisecond))})
	}
	t.batch, t.lag = c.batch, c.lag
	return events
}

// trends holds the trend of each query. It is safe for concurrent use.
type trends struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*trend
}

// fold folds c into the trend of q; see trend.fold.
func (ts *trends) fold(q types.NamespacedName, c commitSeen, interval time.Duration) []event {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.m[q]
	if t == nil {
		if ts.m == nil {
			ts.m = make(map[types.NamespacedName]*trend)
		}
		t = &trend{batch: -1}
		ts.m[q] = t
	}
	if c.batch == t.batch {
		return nil // nothing new committed since the last poll
	}
	return t.fold(c, interval)
}

// forget drops the trend of a deleted query.
func (ts *trends) forget(q types.NamespacedName) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	delete(ts.m, q)
}
