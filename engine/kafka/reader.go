package kafka

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/internal/box"
)

// prefetchLimit is how many decoded records the reader keeps ahead of the
// batches; a batch that needs more lifts it while it waits.
const prefetchLimit = 50_000

// reader consumes the source's partitions in a goroutine of its own and
// decodes their records into rows ahead of Read, so that fetching and
// decoding the next batch overlap with the engine writing the current one.
// The goroutine runs between start and pause (Close pauses it for good).
type reader struct {
	cl     *kgo.Client
	decode func(rows *rowSlab, r *kgo.Record) fetched
	limit  int
	// wake is told of every record handed over: the engine's
	// SourceEnv.Wake, so that an idle query plans as soon as records
	// arrive rather than at its next idle poll.
	wake func()

	mu     sync.Mutex
	cond   *sync.Cond
	parts  map[topicPartition]*partition
	size   int  // records buffered in parts
	needed bool // a take waits for records: the limit does not hold
	// free holds chunks whose records were all taken, for poll to decode
	// into again.
	free   [][]fetched
	cancel context.CancelFunc
	done   chan struct{}
}

// partition is where the reader stands in one partition: every record below
// pos was handed to a batch or skipped; recs holds decoded records at or
// beyond pos, in offset order.
type partition struct {
	pos int64
	// chunks are the decoded records of polls, each in offset order; head
	// is how many of chunks[0] were taken.
	chunks [][]fetched
	head   int
	n      int // records in chunks, less head
	// err is an error the consumer returned for the partition; it stops
	// the partition until the source handles it.
	err error
}

// last returns the offset of the newest buffered record, or -1.
func (p *partition) last() int64 {
	if len(p.chunks) == 0 {
		return -1
	}
	c := p.chunks[len(p.chunks)-1]
	return c[len(c)-1].offset
}

// fetched is one decoded record.
type fetched struct {
	offset int64
	// tsMs is the record's timestamp, Unix milliseconds.
	tsMs    int64
	control bool
	row     engine.Row
	// bad is why the record did not decode; rec is kept for the message
	// and the dead letter.
	bad error
	rec *kgo.Record
}

func newReader(cl *kgo.Client, decode func(*rowSlab, *kgo.Record) fetched, wake func()) *reader {
	if wake == nil {
		wake = func() {}
	}
	r := &reader{cl: cl, decode: decode, limit: prefetchLimit, wake: wake, parts: map[topicPartition]*partition{}}
	r.cond = sync.NewCond(&r.mu)
	return r
}

// assign makes the consumer read each span's partition from the span's
// start, repositioning partitions that stand elsewhere (a replay, a restart)
// with the background goroutine paused.
func (r *reader) assign(spans []span) {
	add := map[string]map[int32]kgo.Offset{}
	from := map[topicPartition]int64{}
	remove := map[string][]int32{}
	r.mu.Lock()
	for _, sp := range spans {
		p := r.parts[sp.tp]
		if p != nil && p.pos == sp.from && p.err == nil {
			continue
		}
		if p != nil {
			remove[sp.tp.topic] = append(remove[sp.tp.topic], sp.tp.partition)
		}
		if add[sp.tp.topic] == nil {
			add[sp.tp.topic] = map[int32]kgo.Offset{}
		}
		add[sp.tp.topic][sp.tp.partition] = kgo.NewOffset().At(sp.from)
		from[sp.tp] = sp.from
	}
	r.mu.Unlock()
	if len(add) == 0 {
		r.start()
		return
	}
	r.pause()
	r.mu.Lock()
	for tp, off := range from {
		if old := r.parts[tp]; old != nil {
			r.size -= old.n
		}
		r.parts[tp] = &partition{pos: off}
	}
	r.mu.Unlock()
	if len(remove) > 0 {
		r.cl.RemoveConsumePartitions(remove)
	}
	r.cl.AddConsumePartitions(add)
	r.start()
}

// drop stops reading a partition.
func (r *reader) drop(tp topicPartition) {
	r.cl.RemoveConsumePartitions(map[string][]int32{tp.topic: {tp.partition}})
	r.mu.Lock()
	if p := r.parts[tp]; p != nil {
		r.size -= p.n
		delete(r.parts, tp)
	}
	r.mu.Unlock()
}

// partitionError is an error the consumer returned for a partition a take
// waits for.
type partitionError struct {
	tp  topicPartition
	pos int64
	err error
}

func (e *partitionError) Error() string { return e.err.Error() }
func (e *partitionError) Unwrap() error { return e.err }

// take hands the records of the spans in pending to out, in offset order
// per partition, removing each span from pending once done: when a record
// (a control record too) at or beyond its end arrived. It returns when
// pending is empty, with a *partitionError for a partition that failed,
// after stallCheck without progress (then pending is not empty), or with
// full once it handed limit records or more (0: no limit).
func (r *reader) take(ctx context.Context, pending map[topicPartition]span, out func(topicPartition, *fetched), limit int) (full bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() { r.needed = false }()
	lastProgress := time.Now()
	handed := 0
	for {
		for tp, sp := range pending {
			if limit > 0 && handed >= limit {
				return true, nil
			}
			p := r.parts[tp]
			if p == nil {
				continue
			}
			room := -1 // no limit
			if limit > 0 {
				room = limit - handed
			}
			taken, done := r.drain(p, tp, sp, out, room)
			if taken > 0 {
				p.n -= taken
				r.size -= taken
				handed += taken
				lastProgress = time.Now()
			}
			if done {
				p.pos = sp.to
				delete(pending, tp)
				continue
			}
			if p.err != nil {
				return false, &partitionError{tp: tp, pos: p.pos, err: p.err}
			}
		}
		if len(pending) == 0 {
			return false, nil
		}
		if limit > 0 && handed >= limit {
			return true, nil
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if time.Since(lastProgress) > stallCheck {
			return false, nil
		}
		r.needed = true
		r.cond.Broadcast() // a poller held back by the limit may go on
		wake := time.AfterFunc(250*time.Millisecond, func() {
			r.mu.Lock()
			r.cond.Broadcast()
			r.mu.Unlock()
		})
		r.cond.Wait()
		wake.Stop()
	}
}

// drain hands the buffered records of p, tp's partition, within the span sp to out, a decoded
// chunk at a time while room (-1: no limit) is left. It returns how many buffered records it
// took (handed over or skipped), and done once the span's end is reached. r.mu is held.
func (r *reader) drain(p *partition, tp topicPartition, sp span, out func(topicPartition, *fetched), room int) (taken int, done bool) {
	for len(p.chunks) > 0 && !done && (room < 0 || taken < room) {
		c := p.chunks[0]
		for p.head < len(c) {
			f := &c[p.head]
			if f.offset < p.pos {
				p.head++
				taken++
				continue
			}
			if f.offset >= sp.to {
				done = true // f stays for the next batch
				break
			}
			out(tp, f)
			p.pos = f.offset + 1
			p.head++
			taken++
			if p.pos >= sp.to {
				done = true
				break
			}
		}
		if p.head == len(c) {
			p.chunks[0] = nil
			p.chunks = p.chunks[1:]
			p.head = 0
			if cap(c) == decodeChunk {
				clear(c) // the rows are the batch's now
				r.free = append(r.free, c[:0])
			}
		}
	}
	return taken, done
}

// position returns where the reader stands in tp.
func (r *reader) position(tp topicPartition) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.parts[tp]; p != nil {
		return p.pos
	}
	return -1
}

// start runs the background goroutine unless it runs.
func (r *reader) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go r.poll(ctx, r.done)
}

// pause stops the background goroutine and waits until it stopped.
func (r *reader) pause() {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.cancel, r.done = nil, nil
	if cancel != nil {
		// Before the broadcast: a poll that wakes must see ctx done, or it
		// waits again and nothing wakes it.
		cancel()
	}
	r.cond.Broadcast()
	r.mu.Unlock()
	if done != nil {
		<-done
	}
}

// decodeChunk is how many records of a partition poll decodes before it
// hands them over and turns to the next partition, so that a batch gets its
// records while the rest of a large fetch is decoded.
const decodeChunk = 4096

// poll fetches and decodes records until ctx ends.
func (r *reader) poll(ctx context.Context, done chan struct{}) {
	defer close(done)
	slab := &rowSlab{}
	// polled is what a poll returned for a partition and is not decoded yet.
	type polled struct {
		tp   topicPartition
		recs []*kgo.Record
		err  error
	}
	var todo []polled
	for {
		r.waitRoom(ctx)
		fs := r.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		todo = todo[:0]
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			todo = append(todo, polled{tp: topicPartition{fp.Topic, fp.Partition}, recs: fp.Records, err: fp.Err})
		})
		// A chunk of every partition in turn: a batch reads all of them.
		for left := len(todo) > 0; left; {
			left = false
			for i := range todo {
				t := &todo[i]
				if len(t.recs) == 0 && t.err == nil {
					continue
				}
				var recs []fetched
				if n := min(len(t.recs), decodeChunk); n > 0 {
					recs = r.chunk()
					for _, rec := range t.recs[:n] {
						recs = append(recs, r.decode(slab, rec))
					}
					t.recs = t.recs[n:]
				}
				r.hand(t.tp, recs, t.err)
				t.err = nil
				left = left || len(t.recs) > 0
			}
		}
		clear(todo) // let the fetched records go
		if errors.Is(fs.Err0(), kgo.ErrClientClosed) {
			return
		}
	}
}

// waitRoom waits until the reader buffers fewer decoded records than its
// limit, a take waits for records, or ctx ends.
func (r *reader) waitRoom(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.size >= r.limit && !r.needed && ctx.Err() == nil {
		r.cond.Wait()
	}
}

// chunk returns an empty slice with room for decodeChunk records.
func (r *reader) chunk() []fetched {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.free); n > 0 {
		c := r.free[n-1]
		r.free = r.free[:n-1]
		return c
	}
	return make([]fetched, 0, decodeChunk)
}

// hand buffers the decoded records of tp, in offset order, and the error
// the consumer returned for it, and wakes a take that waits.
func (r *reader) hand(tp topicPartition, recs []fetched, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.parts[tp]
	if p == nil {
		return // dropped while this poll ran
	}
	if err != nil && !isContextErr(err) && p.err == nil {
		p.err = err
	}
	if last := max(p.pos-1, p.last()); len(recs) > 0 && recs[0].offset <= last {
		// From before a reposition, or already buffered.
		i := 0
		for i < len(recs) && recs[i].offset <= last {
			i++
		}
		recs = recs[i:]
	}
	if len(recs) > 0 {
		p.chunks = append(p.chunks, recs)
		p.n += len(recs)
		r.size += len(recs)
		r.wake()
	}
	r.cond.Broadcast()
}

// rowSlab hands out rows cut from large allocations, boxes their values a
// few hundred at a time (boxes), and shares boxed values that repeat from
// record to record (the topic, a timestamp), which saves an allocation per
// value. It is used by one goroutine.
type rowSlab struct {
	boxes     box.Slab
	topics    map[string]any
	lastTopic string // the topic of the last record, boxed in topicVal
	topicVal  any
	lastTS    time.Time
	ts        any
}

func (s *rowSlab) topic(t string) any {
	if s.topicVal != nil && t == s.lastTopic {
		return s.topicVal // records come a partition at a time
	}
	v, ok := s.topics[t]
	if !ok {
		if s.topics == nil {
			s.topics = map[string]any{}
		}
		v = t
		s.topics[t] = v
	}
	s.lastTopic, s.topicVal = t, v
	return v
}

func (s *rowSlab) timestamp(t time.Time) any {
	if s.ts == nil || !t.Equal(s.lastTS) {
		s.lastTS, s.ts = t, s.boxes.Time(t.UTC())
	}
	return s.ts
}

func (s *rowSlab) row(width int) engine.Row { return s.boxes.Row(width) }
