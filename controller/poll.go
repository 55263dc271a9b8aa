package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/compat"
)

// A status poll runs every resync for every query, and more often for a running one (see
// nextPoll). Reading the whole checkpoint each time
// (the store's access check, metadata, the _latest hint and three entries of each log from
// it, the offsets of the newest commit, a listing of shape/ and the newest shape: 2 LISTs
// and 15-16 GETs) would make the controller the busiest client of every store. So the
// poller remembers, per query, the store it opened and what it read, and a steady poll
// reads at most 2 small objects and lists nothing:
//
//   - the _latest hint, and when it names a commit newer than the one in memory, that
//     commit. The status is built from it: the commit carries the batch's rows, durations,
//     end offsets and lag, the hint the batch's timestamp and watermark (see
//     checkpoint.Hint), and the newest planned batch is shown as the commit's own, as the
//     logs stood the moment it committed.
//   - else one log entry after the head in memory: the offsets entry after the newest
//     planned batch when that one committed (a batch started), else the commit of the
//     planned batch (it committed).
//
// So the status is always one the checkpoint went through, and it may be behind: a writer
// rewrites the hint every checkpoint.HintInterval (4) batches and whenever
// checkpoint.HintMaxAge (1 s) passed since it last did, so the hint of a busy query lags
// its newest commit by up to 3 batches committed within that second, and its status shows
// no batch in flight. A query whose batches are a second or more apart has an exact hint.
// A query that stops right after a burst is caught up one log entry per poll (at most 7
// polls for 3 batches); the status of an idle query is exact. Once quietPolls polls in a row
// found nothing new and no batch is in flight, a poll reads only the next offsets entry (a
// batch writes it before anything else) and stops there while it is absent: an idle query
// costs one GET per resync. (Someone who deletes the newest commit of such a query to have it
// replayed sees the status catch up after the replay's next batch starts.)
//
// When the hint names a commit that is missing (someone deleted the newest commit to have
// the batch replayed), the poll reads the head afresh (the metadata and Checkpoint.Head,
// from the hint: about 18 GETs and a listing of the log that lost its entry) and ignores
// that hint until it moves on. A hint from an engine older than the controller carries no
// batch timestamp and watermark: the poll then reads the batch's offsets entry too (3 GETs). The metadata and the shape change only when an engine starts (it
// claims the checkpoint and records the shape of the spec it runs before its first batch)
// or someone else writes the location, so the whole checkpoint is read again when anything
// that could have caused that changed: the query's uid or generation, its placement or
// credentials, its engine pods, a read that failed, a checkpoint that does not exist. The
// credentials Secret is read again only when its resourceVersion in the cache of Secrets'
// metadata changed (the reconciler watches Secrets: a created, rotated or deleted Secret
// reconciles its queries at once), and after a failed read. The shape an engine records is
// the committed batches' only once its first batch commits, so the first poll that sees a
// commit after a whole read also reads the entry for the batch after the one the whole read
// saw committed (1 GET, once).

// followSlack is how long after a batch is due to commit its poll reads the checkpoint.
const followSlack = time.Second

// nextPoll is how long until the status of q, just computed from old, is read again from the
// checkpoint. A query that is not running, or has committed nothing, is read every resync.
// A running query is read again sooner, to follow its engine closely at a bounded cost:
//
//   - a batch in flight (planned, not committed): after r.follow, when it has likely committed;
//   - a processingTime trigger: just after its next batch is due to commit (the newest batch's
//     time, plus the interval, plus as long as that batch took);
//   - batches back to back (no interval, or late): after r.follow when the poll found a new
//     commit, else at the resync.
//
// Never sooner than r.follow, nor later than the resync.
func (r *QueryReconciler) nextPoll(q *v1.StreamingQuery, old *v1.StreamingQueryStatus) time.Duration {
	st := &q.Status
	if st.Phase != v1.PhaseRunning || st.LastProgress == nil {
		return r.resync
	}
	bound := func(d time.Duration) time.Duration { return min(max(d, r.follow), r.resync) }
	committed := ptrOr(st.LatestCommittedBatch, -1)
	if ptrOr(st.LatestPlannedBatch, -1) > committed {
		return bound(r.follow)
	}
	if interval := q.Spec.Trigger.Interval(); interval > 0 {
		took := time.Duration(st.LastProgress.DurationMs[checkpoint.DurationTotal]) * time.Millisecond
		due := st.LastProgress.Timestamp.Add(interval + took + followSlack)
		if d := due.Sub(r.clock.Now()); d > 0 {
			return bound(d)
		}
	}
	if committed != ptrOr(old.LatestCommittedBatch, -1) {
		return bound(r.follow)
	}
	return r.resync
}

func ptrOr(p *int64, def int64) int64 {
	if p == nil {
		return def
	}
	return *p
}

// poller holds the memory of status polls, per query. It is safe for concurrent use; the
// reconciler never polls one query twice at once.
type poller struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]*pollEntry
}

// pollEntry is what the last poll of one query opened and read.
type pollEntry struct {
	opened storeKey
	// secretStale says to read the credentials Secret again at the next poll, whatever its
	// version: the last read of the checkpoint failed, maybe for credentials that changed.
	secretStale bool
	store       checkpoint.Store
	read        readKey
	cp          *checkpoint.Checkpoint // nil when there was no checkpoint
	snap        snapshot
	// badHint is 1 + a hint that named a missing commit, 0 for none: polls step along the
	// logs instead of trusting it, until the hint names a newer commit.
	badHint int64
	// quiet counts the polls in a row that found nothing new (see quietPolls).
	quiet int
	// shapeSettled is set once the shape was read again at the first commit after the whole
	// read: the shape an engine records for its first batch becomes the committed batches'
	// only when that batch commits.
	shapeSettled bool
}

// storeKey is what an opened store depends on.
type storeKey struct {
	location, store string
	storeGeneration int64
	secretVersion   string
}

func (k storeKey) withoutSecret() storeKey {
	k.secretVersion = ""
	return k
}

// quietPolls is how many polls in a row must find nothing new before a poll of a query with no
// batch in flight reads only the next offsets entry (one GET, not the hint and the probe): an
// idle query then costs one small read per resync. The poll that finds that entry goes on
// as a normal one.
const quietPolls = 2

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
// the last poll allows; pods are q's engine pods. A missing Secret is a *secretMissingError,
// an incomplete one wraps errStoreRefused; any other error means the checkpoint could not be
// read, and the next poll reads it whole.
func (pl *poller) poll(ctx context.Context, cps checkpoints, q *v1.StreamingQuery, p placement, pods []corev1.Pod) (snapshot, error) {
	name := types.NamespacedName{Namespace: q.Namespace, Name: q.Name}
	rk := readKey{uid: q.UID, generation: q.Generation, engine: engineFingerprint(pods)}
	e := pl.entry(name)
	opened := storeKey{location: p.location, store: p.store.Name, storeGeneration: p.store.Generation}
	if e == nil || e.opened.withoutSecret() != opened || e.secretStale || !cps.secretCurrent(ctx, q.Namespace, p, e.opened.secretVersion) {
		sec, err := cps.secret(ctx, q.Namespace, p)
		if err != nil {
			pl.remember(name, nil)
			return snapshot{}, err
		}
		opened.secretVersion = sec.ResourceVersion
		if e == nil || e.opened != opened {
			store, err := openStore(ctx, p, sec, true)
			if err != nil {
				pl.remember(name, nil)
				return snapshot{}, err
			}
			e = &pollEntry{opened: opened, store: store}
		}
		e.secretStale = false
	}
	next, err := e.advance(ctx, rk)
	if err == nil && q.Spec.OnIncompatibleChange == v1.OnIncompatibleRebuild {
		next, err = next.followRebuild(ctx, rk)
	}
	if err != nil {
		// Read it whole next time, with the store kept, and the Secret again: the failure may
		// be credentials that changed.
		e.cp, e.snap, e.secretStale = nil, snapshot{}, true
		pl.remember(name, e)
		return snapshot{}, err
	}
	*e = next
	pl.remember(name, e)
	return e.snap, nil
}

// followRebuild is the rest of the poll of a query whose spec may have its state rebuilt
// (spec.onIncompatibleChange: rebuild): the engine switches the checkpoint to a new
// generation in the same pod, so the poll lists the generations (1 LIST) and reads the
// checkpoint whole after a switch, and reads how far a rebuild under way has come (1 GET,
// and the new generation's head while one is).
func (e pollEntry) followRebuild(ctx context.Context, rk readKey) (pollEntry, error) {
	if e.cp == nil {
		return e, nil
	}
	gen, err := checkpoint.CurrentGeneration(ctx, e.store)
	if err != nil {
		return e, err
	}
	if gen.Number != e.cp.Generation().Number {
		e.cp = nil // switched: read the new generation whole
		if e, err = e.advance(ctx, rk); err != nil {
			return e, err
		}
	}
	e.snap.rebuild, err = checkpoint.ReadRebuildProgress(ctx, e.store, gen)
	return e, err
}

// advance returns the entry brought up to date with the checkpoint.
func (e pollEntry) advance(ctx context.Context, rk readKey) (pollEntry, error) {
	next := e
	next.read = rk
	if e.cp == nil || e.read != rk {
		cp, snap, err := read(ctx, e.store)
		if err != nil {
			return e, err
		}
		next.cp, next.snap, next.badHint, next.quiet, next.shapeSettled = cp, snap, 0, 0, false
		return next, nil
	}
	if e.quiet >= quietPolls && plannedBatch(e.snap.head) == committedBatch(e.snap.head) {
		// A quiet query: a new batch, and so a new commit, would first write the next offsets
		// entry. While it is absent, that one read is the whole poll.
		if _, err := e.cp.Offsets(ctx, plannedBatch(e.snap.head)+1); errors.Is(err, checkpoint.ErrNotFound) {
			next.quiet++
			return next, nil
		}
	}
	snap, hint, err := follow(ctx, e.cp, e.snap, e.badHint-1)
	if err != nil {
		return e, err
	}
	if hint < 0 {
		if !e.shapeSettled && committedBatch(snap.head) > committedBatch(e.snap.head) {
			// The first commit since the whole read: an engine that started since recorded
			// its shape, if it changed, for its first batch, the one after the commit the
			// whole read saw; that batch has committed now, so the shape is the committed
			// batches'. One GET tells.
			data, err := e.cp.ShapeEntry(ctx, committedBatch(e.snap.head)+1)
			switch {
			case errors.Is(err, checkpoint.ErrNotFound):
			case err != nil:
				return e, err
			default:
				if snap.shape, err = compat.ParseShape(data); err != nil {
					return e, fmt.Errorf("poll %s: %w", e.cp.Location(), err)
				}
				snap.shaped = true
			}
			next.shapeSettled = true
		}
		next.quiet = 0
		if plannedBatch(snap.head) == plannedBatch(e.snap.head) && committedBatch(snap.head) == committedBatch(e.snap.head) {
			next.quiet = e.quiet + 1
		}
		next.snap = snap
		return next, nil
	}
	// The hint names a missing commit: read the head afresh.
	cp, err := checkpoint.Load(ctx, e.store)
	if err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
		return e, err
	}
	if err != nil || cp.Metadata().ID != e.snap.meta.ID || cp.Metadata().Owner != e.snap.meta.Owner {
		return pollEntry{opened: e.opened, store: e.store}.advance(ctx, rk) // gone, or another checkpoint now
	}
	snap = e.snap
	if err := readHead(ctx, cp, &snap); err != nil {
		return e, err
	}
	next.cp, next.snap, next.badHint, next.quiet = cp, snap, hint+1, 0
	return next, nil
}

// follow brings snap up to date with at most two reads (see the top of this file), ignoring
// a hint that names batch badHint or an older one. It returns the hint's batch when the
// commit the hint names is missing (snap is then unchanged), else -1.
func follow(ctx context.Context, cp *checkpoint.Checkpoint, snap snapshot, badHint int64) (_ snapshot, missing int64, _ error) {
	planned, committed := plannedBatch(snap.head), committedBatch(snap.head)
	h, err := cp.LatestHint(ctx)
	switch {
	case errors.Is(err, checkpoint.ErrNotFound), errors.Is(err, checkpoint.ErrDamaged):
		h = checkpoint.Hint{Commit: -1} // no commit yet, or the hint was removed: step along the logs
	case err != nil:
		return snap, -1, fmt.Errorf("poll %s: %w", cp.Location(), err)
	}
	if h.Commit > committed && h.Commit > badHint {
		c, err := cp.Commit(ctx, h.Commit)
		switch {
		case errors.Is(err, checkpoint.ErrNotFound):
			return snap, h.Commit, nil
		case err != nil:
			return snap, -1, fmt.Errorf("poll %s: %w", cp.Location(), err)
		}
		// As the logs stood when the hinted batch committed. The planned entry holds only
		// what the status shows of it, the batch, timestamp and watermark, not its sources.
		o := &checkpoint.Offsets{BatchID: h.Commit}
		snap.head = checkpoint.Head{Planned: o, Committed: &c}
		snap.committedOffsets = o
		if h.BatchTimestampMs != nil {
			o.BatchTimestampMs, o.BatchWatermarkMs = *h.BatchTimestampMs, *h.BatchWatermarkMs
			return snap, -1, nil
		}
		// A hint from a writer that did not record them: a third read.
		full, err := cp.Offsets(ctx, h.Commit)
		switch {
		case errors.Is(err, checkpoint.ErrNotFound):
			snap.committedOffsets = nil // purged: the status shows the commit's own time
		case err != nil:
			return snap, -1, fmt.Errorf("poll %s: %w", cp.Location(), err)
		default:
			snap.head.Planned, snap.committedOffsets = &full, &full
		}
		return snap, -1, nil
	}
	if planned == committed {
		o, err := cp.Offsets(ctx, planned+1)
		switch {
		case errors.Is(err, checkpoint.ErrNotFound):
		case err != nil:
			return snap, -1, fmt.Errorf("poll %s: %w", cp.Location(), err)
		default:
			snap.head.Planned = &o // the batch after the newest commit started
		}
		return snap, -1, nil
	}
	c, err := cp.Commit(ctx, planned)
	switch {
	case errors.Is(err, checkpoint.ErrNotFound):
	case err != nil:
		return snap, -1, fmt.Errorf("poll %s: %w", cp.Location(), err)
	default:
		// The running batch committed; its offsets entry is the planned one in memory.
		snap.head.Committed = &c
		snap.committedOffsets = snap.head.Planned
	}
	return snap, -1, nil
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
// metadata or a new shape, and when it ends: the poll then reads the logs whole, so that a
// query whose trigger ended is Completed with its last batch in the status (stepping on
// from an earlier poll, it could show a batch or two fewer until later resyncs).
func engineFingerprint(pods []corev1.Pod) string {
	parts := make([]string, 0, len(pods))
	for i := range pods {
		p := &pods[i]
		s := string(p.UID)
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == EngineContainer {
				s += fmt.Sprintf("/%d/%t/%t", cs.RestartCount, cs.Ready, cs.State.Terminated != nil)
			}
		}
		parts = append(parts, s)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
