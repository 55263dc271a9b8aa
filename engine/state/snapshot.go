package state

import (
	"context"
	"errors"
	"sync"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

// snapJob is a snapshot of one partition at one version. It is encoded by
// the snapshotter, or by the batch that next changes the partition if that
// comes first (Partition.settle), so that the snapshot holds exactly the
// version's state without copying the partition.
type snapJob struct {
	p       *Partition
	version int64
	// data is the encoded snapshot, set under p.mu; nil until encoded.
	data []byte
}

// snapshotter writes snapshots on its own goroutine, started by
// startSnapshotter and stopped by stop, which waits for the queued ones.
type snapshotter struct {
	s       *Store
	jobs    chan *snapJob
	pending sync.WaitGroup // queued jobs not yet done
	done    chan struct{}
	cancel  context.CancelFunc
	once    sync.Once
}

func startSnapshotter(ctx context.Context, s *Store, queue int) *snapshotter {
	ctx, cancel := context.WithCancel(ctx)
	sn := &snapshotter{s: s, jobs: make(chan *snapJob, queue), done: make(chan struct{}), cancel: cancel}
	go sn.run(ctx)
	return sn
}

// schedule queues a snapshot of p at version, the version p holds now. A
// full queue skips it: p keeps its deltas and is scheduled again later.
func (sn *snapshotter) schedule(p *Partition, version int64) {
	job := &snapJob{p: p, version: version}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending != nil {
		return
	}
	sn.pending.Add(1)
	select {
	case sn.jobs <- job:
		p.pending = job
		p.sinceSnapshot = 0
	default:
		sn.pending.Done()
	}
}

func (sn *snapshotter) run(ctx context.Context) {
	defer close(sn.done)
	for job := range sn.jobs {
		sn.write(ctx, job)
		sn.pending.Done()
	}
}

func (sn *snapshotter) write(ctx context.Context, job *snapJob) {
	p := job.p
	p.mu.Lock()
	if p.pending == job {
		job.data = p.encodeSnapshot(job.version)
		p.pending = nil
	}
	data := job.data
	p.mu.Unlock()
	if data == nil { // dropped by a Load
		return
	}
	key := checkpoint.StateFile{Operator: sn.s.meta.Operator, Partition: p.id, Version: job.version, Kind: checkpoint.StateSnapshot}.Key()
	if err := sn.s.cs.Create(ctx, key, data); err != nil && !errors.Is(err, checkpoint.ErrExists) {
		// Snapshots only shorten loading: the deltas stay until one is written.
		sn.s.opts.Logger.Warn("Failed to write a state snapshot", "key", key, "error", err)
		p.mu.Lock()
		p.sinceSnapshot += sn.s.opts.SnapshotEvery
		p.mu.Unlock()
	}
}

// flush waits until every queued snapshot is written or dropped.
func (sn *snapshotter) flush() { sn.pending.Wait() }

// stop waits for the queued snapshots and ends the goroutine.
func (sn *snapshotter) stop() {
	sn.once.Do(func() {
		close(sn.jobs)
		<-sn.done
		sn.cancel()
	})
}

// settle encodes the partition's pending snapshot before the partition
// changes. Called with p.mu held.
func (p *Partition) settle() {
	if job := p.pending; job != nil {
		job.data = p.encodeSnapshot(job.version)
		p.pending = nil
	}
}

// encodeSnapshot encodes the partition's whole state. Called with p.mu held.
func (p *Partition) encodeSnapshot(version int64) []byte {
	w := newFileWriter(checkpoint.StateSnapshot, version, p.id, int64(len(p.rows)), int(p.bytes)-len(p.rows)*(entryOverhead-8))
	for k, v := range p.rows {
		w.put(k, v)
	}
	return w.finish()
}
