package ui

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/lockstep-dev/lockstep/compat"
	"github.com/lockstep-dev/lockstep/engine"
)

var _ engine.IdleObserver = (*Ring)(nil)

// DefaultSize is how many batches a Ring keeps unless told otherwise.
const DefaultSize = 120

// Query is what the page says of a query besides its batches.
type Query struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Location is the checkpoint location.
	Location string `json:"checkpoint,omitempty"`
	// Shape is the query's shape (compat.ShapeOf its spec, or the checkpoint's newest); nil if unknown.
	Shape *compat.Shape `json:"shape,omitempty"`
	// Guarantee is known before the run starts for a stopped query; a
	// running query's comes with its Start.
	Guarantee *engine.Guarantee `json:"guarantee,omitempty"`
	// Live is true for a running query, false for the history of a stopped one.
	Live bool `json:"live"`
}

// Snapshot is the ring's content, the body of /api/progress.
type Snapshot struct {
	Query Query `json:"query"`
	// Start is the run's start; nil before it, or for a stopped query.
	Start *engine.Start `json:"start,omitempty"`
	// Status is starting, running, idle (the last trigger found no new data),
	// stopped or failed.
	Status string `json:"status"`
	// IdleSince is when triggers began to find no new data, if they do.
	IdleSince *time.Time `json:"idleSince,omitempty"`
	// LastError is the newest warning or error logged, or the run's error.
	LastError *Event `json:"lastError,omitempty"`
	// Batches are the recent batches' progress, oldest first.
	Batches []engine.Progress `json:"batches"`
}

// Event is a dated message.
type Event struct {
	At      time.Time `json:"at"`
	Message string    `json:"message"`
}

// Statuses.
const (
	StatusStarting = "starting"
	StatusRunning  = "running"
	StatusIdle     = "idle"
	StatusStopped  = "stopped"
	StatusFailed   = "failed"
)

// Ring keeps the last batches' progress of one query. Its methods are safe
// for concurrent use: the engine calls the Observer methods while Handler
// reads.
type Ring struct {
	mu        sync.Mutex
	size      int
	query     Query
	start     *engine.Start
	status    string
	idleSince *time.Time
	lastErr   *Event
	batches   []engine.Progress
}

// NewRing returns a ring of the last size batches (DefaultSize when size <= 0)
// of query.
func NewRing(query Query, size int) *Ring {
	if size <= 0 {
		size = DefaultSize
	}
	status := StatusStarting
	if !query.Live {
		status = StatusStopped
	}
	return &Ring{size: size, query: query, status: status}
}

// Started records the run's start.
func (r *Ring) Started(s engine.Start) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.start = &s
	r.status = StatusRunning
}

// Committed adds a batch, dropping the oldest when the ring is full.
func (r *Ring) Committed(p engine.Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.add(p)
	if r.status != StatusStopped && r.status != StatusFailed {
		r.status = StatusRunning
	}
	r.idleSince = nil
}

// Idle records a trigger that found no new data.
func (r *Ring) Idle(at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.idleSince == nil {
		r.idleSince = &at
	}
	if r.status == StatusRunning {
		r.status = StatusIdle
	}
}

// Add adds a batch of a stopped query's history.
func (r *Ring) Add(p engine.Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.add(p)
}

// Ended records the end of the run: err nil for a stop or a finished trigger.
func (r *Ring) Ended(at time.Time, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = StatusStopped
	if err != nil {
		r.status = StatusFailed
		r.lastErr = &Event{At: at, Message: err.Error()}
	}
}

// Snapshot returns a copy of the ring's content.
func (r *Ring) Snapshot() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Snapshot{Query: r.query, Status: r.status, Batches: append([]engine.Progress{}, r.batches...)}
	if r.start != nil {
		st := *r.start
		s.Start = &st
	}
	if r.idleSince != nil {
		t := *r.idleSince
		s.IdleSince = &t
	}
	if r.lastErr != nil {
		e := *r.lastErr
		s.LastError = &e
	}
	return s
}

// LogHandler returns a handler that passes every record to next and keeps
// the newest at level Warn or above as the page's last error. Give it to the
// engine's logger: the engine logs there what it survived (a retried sink, a
// source that failed to list).
func (r *Ring) LogHandler(next slog.Handler) slog.Handler { return &logTap{ring: r, next: next} }

func (r *Ring) add(p engine.Progress) {
	if len(r.batches) == r.size {
		copy(r.batches, r.batches[1:])
		r.batches = r.batches[:len(r.batches)-1]
	}
	r.batches = append(r.batches, p)
}

// logTap is Ring.LogHandler's handler.
type logTap struct {
	ring *Ring
	next slog.Handler
}

func (l *logTap) Enabled(ctx context.Context, lvl slog.Level) bool {
	return lvl >= slog.LevelWarn || l.next.Enabled(ctx, lvl)
}

func (l *logTap) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level >= slog.LevelWarn {
		msg := rec.Message
		rec.Attrs(func(a slog.Attr) bool {
			msg += " " + a.String()
			return true
		})
		l.ring.mu.Lock()
		l.ring.lastErr = &Event{At: rec.Time, Message: msg}
		l.ring.mu.Unlock()
	}
	if !l.next.Enabled(ctx, rec.Level) {
		return nil
	}
	return l.next.Handle(ctx, rec)
}

func (l *logTap) WithAttrs(as []slog.Attr) slog.Handler {
	return &logTap{ring: l.ring, next: l.next.WithAttrs(as)}
}

func (l *logTap) WithGroup(name string) slog.Handler {
	return &logTap{ring: l.ring, next: l.next.WithGroup(name)}
}
