package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
)

// A status poll runs every resync for every query. Reading the whole checkpoint each time
// (the store's access check, metadata, the _latest hint and three entries of each log from
// it, the offsets of the newest commit, a listing of shape/ and the newest shape: 2 LISTs
// and 15-16 GETs) would make the controller the busiest client of every store. So the
// poller remembers, per query, the store it opened and what it read, and a poll reads only
// what can have changed since: the offsets entry after the newest planned batch and the
// commit after the newest committed one, 2 GETs, which pin the logs down when the query
// took at most one step (a batch started, or the running one committed) since the last
// poll. Only a query that moved further has its head read afresh from the hint (a GET of
// the metadata and Checkpoint.Head: 14-15 GETs, a listing only when the hint is missing or
// stale), and the poll after such a one starts there.
//
// The metadata and the shape change only when an engine starts (it claims the checkpoint
// and records the shape of the spec it runs before its first batch) or someone else writes
// the location, so the whole checkpoint is read again when anything that could have caused
// that changed: the query's uid or generation, its placement or credentials, its engine
// pods, a read that failed, a checkpoint that does not exist or has no shape yet.

// poller holds the memory of status polls, per query. It is safe for concurrent use; the
// reconciler never polls one query twice at once.
type poller struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]*pollEntry
}

// pollEntry is what the last poll of one query opened and read.
type pollEntry struct {
	opened storeKey
	store  checkpoint.Store
	read   readKey
	cp     *checkpoint.Checkpoint // nil when there was no checkpoint
	snap   snapshot
	// moved is set when the last poll found the query more than one step further than the
	// poll before: two reads would not have pinned the logs down, and will not next time.
	moved bool
}

// storeKey is what an opened store depends on.
type storeKey struct {
	location, store string
	storeGeneration int64
	secretVersion   string
}

// readKey is what the metadata and shape in memory depend on.
type readKey struct {
	uid        types.UID
	generation int64
	engine     string
}

// forget drops the memory of a query (it was deleted).
func (pl *poller) forget(q types.NamespacedName) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	delete(pl.entries, q)
}

func (pl *poller) entry(q types.NamespacedName) *pollEntry {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.entries[q]
}

func (pl *poller) remember(q types.NamespacedName, e *pollEntry) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.entries == nil {
		pl.entries = make(map[types.NamespacedName]*pollEntry)
	}
	if e == nil {
		delete(pl.entries, q)
		return
	}
	pl.entries[q] = e
}

// poll reads the checkpoint of q at p for its status, reading as little as the memory of
// the last poll allows; pods are q's engine pods. A missing or incomplete Secret wraps
// errStoreRefused; any other error means the checkpoint could not be read, and the next poll
// reads it whole.
func (pl *poller) poll(ctx context.Context, cps checkpoints, q *v1.StreamingQuery, p placement, pods []corev1.Pod) (snapshot, error) {
	name := types.NamespacedName{Namespace: q.Namespace, Name: q.Name}
	sec, err := cps.secret(ctx, q.Namespace, p)
	if err != nil {
		pl.remember(name, nil)
		return snapshot{}, err
	}
	opened := storeKey{location: p.location, store: p.store.Name, storeGeneration: p.store.Generation, secretVersion: sec.ResourceVersion}
	rk := readKey{uid: q.UID, generation: q.Generation, engine: engineFingerprint(pods)}
	e := pl.entry(name)
	if e == nil || e.opened != opened {
		store, err := openStore(ctx, p, sec, true)
		if err != nil {
			pl.remember(name, nil)
			return snapshot{}, err
		}
		e = &pollEntry{opened: opened, store: store}
	}
	next, err := e.advance(ctx, rk)
	if err != nil {
		e.cp, e.snap = nil, snapshot{} // read it whole next time, with the store kept
		pl.remember(name, e)
		return snapshot{}, err
	}
	*e = next
	pl.remember(name, e)
	return e.snap, nil
}

// advance returns the entry brought up to date with the checkpoint.
func (e pollEntry) advance(ctx context.Context, rk readKey) (pollEntry, error) {
	next := e
	next.read = rk
	if e.cp == nil || e.read != rk || !e.snap.shaped {
		cp, snap, err := read(ctx, e.store)
		if err != nil {
			return e, err
		}
		next.cp, next.snap, next.moved = cp, snap, false
		return next, nil
	}
	if !e.moved {
		snap, pinned, err := step(ctx, e.cp, e.snap)
		if err != nil {
			return e, err
		}
		if pinned {
			next.snap = snap
			return next, nil
		}
	}
	// The query moved further: read its head afresh, from the hint.
	cp, err := checkpoint.Load(ctx, e.store)
	if err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
		return e, err
	}
	if err != nil || cp.Metadata().ID != e.snap.meta.ID || cp.Metadata().Owner != e.snap.meta.Owner {
		return pollEntry{opened: e.opened, store: e.store}.advance(ctx, rk) // gone, or another checkpoint now
	}
	snap := e.snap
	if err := readHead(ctx, cp, &snap); err != nil {
		return e, err
	}
	next.cp, next.snap = cp, snap
	next.moved = steps(e.snap.head, snap.head) > 1
	return next, nil
}

// step reads the offsets entry after the newest planned batch of snap and the commit after
// its newest commit, at once. pinned is false when the two do not tell the head: the query
// took more than one step, or wrote between the two reads.
func step(ctx context.Context, cp *checkpoint.Checkpoint, snap snapshot) (_ snapshot, pinned bool, _ error) {
	planned, committed := plannedBatch(snap.head), committedBatch(snap.head)
	var (
		o    checkpoint.Offsets
		oerr error
		wg   sync.WaitGroup
	)
	wg.Go(func() { o, oerr = cp.Offsets(ctx, planned+1) })
	c, cerr := cp.Commit(ctx, committed+1)
	wg.Wait()
	for _, err := range []error{oerr, cerr} {
		if err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
			return snap, false, fmt.Errorf("poll %s: %w", cp.Location(), err)
		}
	}
	newPlanned, newCommit := oerr == nil, cerr == nil
	switch {
	case !newPlanned && !newCommit:
		return snap, true, nil
	case newPlanned && !newCommit && planned == committed:
		// The batch after the newest commit started.
		snap.head.Planned = &o
		return snap, true, nil
	case newCommit && !newPlanned && committed+1 == planned:
		// The running batch committed; its offsets entry is the planned one in memory.
		snap.head.Committed = &c
		snap.committedOffsets = snap.head.Planned
		return snap, true, nil
	default:
		return snap, false, nil
	}
}

// steps counts the log entries added between two heads.
func steps(old, now checkpoint.Head) int64 {
	return plannedBatch(now) - plannedBatch(old) + committedBatch(now) - committedBatch(old)
}

// plannedBatch is the newest planned batch, -1 for none.
func plannedBatch(h checkpoint.Head) int64 {
	if h.Planned == nil {
		return -1
	}
	return h.Planned.BatchID
}

// committedBatch is the newest committed batch, -1 for none.
func committedBatch(h checkpoint.Head) int64 {
	if h.Committed == nil {
		return -1
	}
	return h.Committed.BatchID
}

// engineFingerprint names the engine pods and their containers' lives: it changes when an
// engine starts, restarts or becomes ready, which is when it may write the checkpoint's
// metadata or a new shape.
func engineFingerprint(pods []corev1.Pod) string {
	parts := make([]string, 0, len(pods))
	for i := range pods {
		p := &pods[i]
		s := string(p.UID)
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == EngineContainer {
				s += fmt.Sprintf("/%d/%t", cs.RestartCount, cs.Ready)
			}
		}
		parts = append(parts, s)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
