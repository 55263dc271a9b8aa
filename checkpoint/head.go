package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Head is what a restart finds at the end of the logs.
type Head struct {
	// Planned is the newest offsets entry; nil for a new checkpoint. A seal is not one.
	Planned *Offsets
	// Committed is the newest commit entry; nil before the first commit.
	Committed *Commit
	// Sealed is the seal a rebuild wrote after Planned (ConfSealed): no batch may be planned
	// in this generation any more. nil when there is none.
	Sealed *Offsets
}

// Replay reports whether the newest planned batch was not committed: a
// restart must re-run it with exactly its logged offsets, watermark and
// timestamp.
func (h Head) Replay() bool {
	return h.Planned != nil && (h.Committed == nil || h.Committed.BatchID < h.Planned.BatchID)
}

// Next returns the batch a restart runs: the planned batch when it is
// replayed, else the one after it (0 for a new checkpoint).
func (h Head) Next() int64 {
	switch {
	case h.Planned == nil:
		return 0
	case h.Replay():
		return h.Planned.BatchID
	default:
		return h.Planned.BatchID + 1
	}
}

// Hint is the content of the _latest object: a recent commit, written by
// AddCommit (see HintInterval and HintMaxAge). It is only ever trusted as a
// place to start looking: Head reads forward from it.
type Hint struct {
	// Commit is a committed batch: the newest one when the hint was written.
	Commit int64 `json:"commit"`
	// BatchTimestampMs and BatchWatermarkMs are those of Commit's offsets
	// entry, so that a reader of the hint and the commit it names has the
	// batch's timestamp and watermark without reading a third object. Both
	// are nil when the writer had neither written nor read that entry, and in
	// hints written before Lockstep recorded them.
	BatchTimestampMs *int64 `json:"batchTimestampMs,omitempty"`
	BatchWatermarkMs *int64 `json:"batchWatermarkMs,omitempty"`
}

// HintInterval is how often, in batches, AddCommit rewrites the _latest hint.
// An overwrite costs more than a create on S3 servers (and a request costs
// money on AWS); a hint lagging by up to HintInterval-1 batches costs a
// restarting process as many extra reads, once.
const HintInterval = 4

// HintMaxAge is how long a writer lets its hint lag: AddCommit also rewrites
// _latest when at least this long passed since this Checkpoint last wrote it
// (or it never did). A query whose batches commit HintMaxAge or more apart
// thus always has an exact hint, at one overwrite per batch, while a busy one
// still writes it every HintInterval batches; in between a writer adds at most
// one overwrite per HintMaxAge. Either way the hint lags the newest commit by
// at most HintInterval-1 batches, committed within HintMaxAge of the hint's.
const HintMaxAge = time.Second

// hintState is what a writing Checkpoint knows of the hint: when it last
// wrote it, and the newest offsets entry it wrote or read, whose timestamp
// and watermark the next hint carries.
type hintState struct {
	mu      sync.Mutex
	written time.Time // zero: never
	planned *Offsets  // only BatchID, BatchTimestampMs and BatchWatermarkMs
}

// plan records that o is the newest offsets entry this Checkpoint has seen.
func (s *hintState) plan(o Offsets) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.planned == nil || s.planned.BatchID <= o.BatchID {
		s.planned = &Offsets{BatchID: o.BatchID, BatchTimestampMs: o.BatchTimestampMs, BatchWatermarkMs: o.BatchWatermarkMs}
	}
}

// due reports whether the commit of batch at now rewrites the hint, and with
// what; a write that is due counts as written at now.
func (s *hintState) due(batch int64, now time.Time) (Hint, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if batch%HintInterval != 0 && !s.written.IsZero() && now.Sub(s.written) < HintMaxAge {
		return Hint{}, false
	}
	s.written = now
	h := Hint{Commit: batch}
	if p := s.planned; p != nil && p.BatchID == batch {
		ts, wm := p.BatchTimestampMs, p.BatchWatermarkMs
		h.BatchTimestampMs, h.BatchWatermarkMs = &ts, &wm
	}
	return h, true
}

// failed undoes the record of the write at at, so that the next commit
// writes the hint again.
func (s *hintState) failed(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written.Equal(at) {
		s.written = time.Time{}
	}
}

// writeHint rewrites _latest after the commit of batch, when it is due.
func (c *Checkpoint) writeHint(ctx context.Context, batch int64) {
	now := c.now()
	h, due := c.hint.due(batch, now)
	if !due {
		return
	}
	data, _ := json.Marshal(h) // integers only: cannot fail
	if err := c.store.Put(ctx, latestKey, append(data, '\n')); err != nil {
		c.hint.failed(now) // a stale or missing hint costs requests, not correctness
	}
}

// LatestHint reads the _latest hint. A missing hint is an error wrapping
// ErrNotFound, an unparsable one ErrDamaged. The hint names a commit that
// existed when it was written; newer commits may exist (see HintMaxAge), and
// a user may have deleted the one it names since.
func (c *Checkpoint) LatestHint(ctx context.Context) (Hint, error) {
	data, err := c.get(ctx, latestKey)
	if err != nil {
		return Hint{}, err
	}
	var h Hint
	if err := json.Unmarshal(data, &h); err != nil {
		return Hint{}, fmt.Errorf("read %s: %w: %w", c.name(latestKey), ErrDamaged, err)
	}
	if h.Commit < 0 || (h.BatchTimestampMs == nil) != (h.BatchWatermarkMs == nil) {
		return Hint{}, fmt.Errorf("read %s: %w: %s", c.name(latestKey), ErrDamaged, bytes.TrimSpace(data))
	}
	return h, nil
}

// maxProbes bounds how far Head reads forward from the hint before it lists
// the log instead.
const maxProbes = 2 * HintInterval

// Head finds the newest offsets and commit entries and checks that they fit
// together (the newest commit is the newest planned batch or the one
// before). It fails, naming the object, on a damaged entry or on logs that
// contradict each other; it never falls back to an older batch.
//
// Its cost does not grow with the number of retained batches: it starts from
// the newest commit this Checkpoint has seen, else from the _latest hint (a
// recent commit, see HintInterval and HintMaxAge), and reads that entry of each log and the
// few after it at once, all concurrently: one round of six reads for the
// writer, one round of twelve plus the hint for a restarted process. Only
// when the hint is missing, points at a missing entry or lags by more than
// 2*HintInterval batches does it list the log.
func (c *Checkpoint) Head(ctx context.Context) (Head, error) {
	// From the newest commit seen, the logs end at most one batch later:
	// read three entries of each. From the hint, they may end HintInterval
	// batches later.
	hint, window := c.known.Load()-1, 3
	if hint < 0 {
		hint, window = c.readHint(ctx), HintInterval+2
	}
	// The two logs are independent: walk them at the same time.
	var (
		wg           sync.WaitGroup
		lb, cb       int64
		ldata, cdata []byte
		lerr, cerr   error
	)
	wg.Go(func() { lb, ldata, lerr = c.newest(ctx, OffsetsKey, OffsetsDir, hint, window) })
	cb, cdata, cerr = c.newest(ctx, CommitKey, CommitsDir, hint, window)
	wg.Wait()
	if err := errors.Join(lerr, cerr); err != nil {
		return Head{}, err
	}
	var h Head
	if lb >= 0 {
		o, err := c.decodeOffsets(lb, ldata)
		if err != nil {
			return Head{}, err
		}
		if o.Sealed() && lb > 0 {
			// A rebuild sealed the generation after its newest planned batch, which may
			// not have committed: that batch is the head.
			sealed := o
			h.Sealed = &sealed
			lb--
			if o, err = c.Offsets(ctx, lb); err != nil {
				return Head{}, err
			}
		}
		h.Planned = &o
		c.hint.plan(o)
	}
	if cb >= 0 {
		cm, err := c.decodeCommit(cb, cdata)
		if err != nil {
			return Head{}, err
		}
		h.Committed = &cm
	}
	switch {
	case lb < 0 && cb >= 0:
		return Head{}, fmt.Errorf("%w: %s exists but the offsets log is empty", ErrDamaged, c.name(CommitKey(cb)))
	case cb > lb:
		return Head{}, fmt.Errorf("%w: %s exists but the newest offsets entry is %s", ErrDamaged, c.name(CommitKey(cb)), c.name(OffsetsKey(lb)))
	case lb > 0 && cb < lb-1:
		return Head{}, fmt.Errorf("%w: %s is planned but %s is missing (newest commit: %d)", ErrDamaged, c.name(OffsetsKey(lb)), c.name(CommitKey(lb-1)), cb)
	}
	if cb >= 0 {
		c.remember(cb)
	}
	return h, nil
}

// remember records that batch is committed, so that the next Head starts
// from it without reading the hint.
func (c *Checkpoint) remember(batch int64) {
	for {
		old := c.known.Load()
		if old > batch || c.known.CompareAndSwap(old, batch+1) {
			return
		}
	}
}

// readHint returns the batch in _latest, or -1 when there is no usable hint.
func (c *Checkpoint) readHint(ctx context.Context) int64 {
	h, err := c.LatestHint(ctx)
	if err != nil {
		return -1 // missing or unreadable: Head lists instead
	}
	return h.Commit
}

// newest returns the newest entry of a log and its content, or -1 for an
// empty log. It starts from batch from (or lists the log when from < 0),
// reading window entries from there at once, until one is missing.
func (c *Checkpoint) newest(ctx context.Context, key func(int64) string, dir string, from int64, window int) (int64, []byte, error) {
	if from >= 0 {
		var last []byte // the entry before start
		for start := from; start < from+maxProbes; start += int64(window) {
			datas := make([][]byte, window)
			errs := make([]error, window)
			var wg sync.WaitGroup
			for i := range window {
				wg.Go(func() { datas[i], errs[i] = c.store.Get(ctx, key(start+int64(i))) })
			}
			wg.Wait()
			for i, err := range errs {
				switch {
				case errors.Is(err, ErrNotFound) && start == from && i == 0:
					goto list // the starting entry is gone: trust only a listing
				case errors.Is(err, ErrNotFound) && i == 0:
					return start - 1, last, nil
				case errors.Is(err, ErrNotFound):
					return start + int64(i) - 1, datas[i-1], nil
				case err != nil:
					return 0, nil, fmt.Errorf("read %s: %w", c.name(key(start+int64(i))), err)
				}
			}
			last = datas[window-1]
		}
	}
list:
	batches, err := c.logBatches(ctx, dir)
	if err != nil {
		return 0, nil, err
	}
	if len(batches) == 0 {
		return -1, nil, nil
	}
	n := batches[len(batches)-1]
	data, err := c.get(ctx, key(n))
	if err != nil {
		return 0, nil, err
	}
	return n, data, nil
}
