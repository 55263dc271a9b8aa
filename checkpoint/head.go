package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
)

// Head is what a restart finds at the end of the logs.
type Head struct {
	// Planned is the newest offsets entry; nil for a new checkpoint.
	Planned *Offsets
	// Committed is the newest commit entry; nil before the first commit.
	Committed *Commit
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

// latestHint is the content of the _latest object.
type latestHint struct {
	Commit int64 `json:"commit"`
}

// HintInterval is how often, in batches, AddCommit rewrites the _latest hint.
// An overwrite costs more than a create on S3 servers; a hint lagging by up to
// HintInterval-1 batches costs a restarting process as many extra reads, once.
const HintInterval = 4

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
// recent commit, see HintInterval), and reads that entry of each log and the
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
		h.Planned = &o
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
	data, err := c.store.Get(ctx, latestKey)
	if err != nil {
		return -1 // missing or unreadable: Head lists instead
	}
	var h latestHint
	if err := json.Unmarshal(data, &h); err != nil || h.Commit < 0 {
		return -1
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
