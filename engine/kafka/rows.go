package kafka

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"

	"github.com/twmb/franz-go/pkg/kgo"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
)

// rowBatch turns the records of one Read into rows. Rows are kept per
// partition and returned in partition order, each partition's in offset
// order, so that a replayed batch yields the same rows in the same order
// (a webhook sink's chunks, and their keys, depend on it).
type rowBatch struct {
	s     *Source
	batch int64
	index map[topicPartition]int
	// last and lastPart are the partition of the last row added and its
	// index: rows come a partition at a time.
	last     topicPartition
	lastPart int
	parts    [][]engine.Row
	// emit takes the rows a chunk at a time (ReadChunks): they gather in
	// chunk, and parts stays empty.
	emit  func([]engine.Row) error
	chunk []engine.Row
	// newest holds, per partition, the newest record timestamp (Unix ms)
	// read, 0 for none.
	newest    []int64
	malformed int64
	dead      bytes.Buffer
	err       error
}

// readChunkRows is how many records ReadChunks hands over at a time, at the
// most.
const readChunkRows = 8192

func (s *Source) newBatch(batch int64, spans []span, emit func([]engine.Row) error) *rowBatch {
	b := &rowBatch{s: s, batch: batch, index: make(map[topicPartition]int, len(spans)), lastPart: -1,
		parts: make([][]engine.Row, len(spans)), newest: make([]int64, len(spans)), emit: emit}
	for i, sp := range spans {
		b.index[sp.tp] = i
		if emit == nil {
			b.parts[i] = make([]engine.Row, 0, min(sp.to-sp.from, 1<<20))
		}
	}
	if emit != nil {
		b.chunk = make([]engine.Row, 0, readChunkRows)
	}
	return b
}

// flush stops the read at a malformed record (onMalformed: fail), and hands
// the rows gathered so far to emit.
func (b *rowBatch) flush() error {
	if b.err != nil {
		return b.err
	}
	if len(b.chunk) == 0 {
		return nil
	}
	err := b.emit(b.chunk)
	clear(b.chunk) // the rows are the engine's
	b.chunk = b.chunk[:0]
	return err
}

// rows returns the batch's rows in order.
func (b *rowBatch) rows() []engine.Row {
	if len(b.parts) == 1 {
		return b.parts[0]
	}
	n := 0
	for _, p := range b.parts {
		n += len(p)
	}
	rows := make([]engine.Row, 0, n)
	for _, p := range b.parts {
		rows = append(rows, p...)
	}
	return rows
}

// decode turns a record into a row: the record's columns, then the
// metadata columns. It runs on the reader's goroutine.
func (s *Source) decode(slab *rowSlab, r *kgo.Record) fetched {
	f := fetched{offset: r.Offset, tsMs: r.Timestamp.UnixMilli(), control: r.Attrs.IsControl()}
	if f.control {
		return f
	}
	row := slab.row(s.width)
	if err := s.dec.decode(r.Value, row, &slab.boxes); err != nil {
		clear(row)
		f.bad, f.rec = err, r
		return f
	}
	n := len(s.dec.cols)
	switch {
	case r.Key == nil:
	case s.key == nil:
		row[n] = slab.boxes.Bytes(r.Key)
	default:
		text, null, err := s.key.text(r.Key)
		if err != nil {
			clear(row)
			f.bad, f.rec = fmt.Errorf("key: %w", err), r
			return f
		}
		if !null {
			row[n] = slab.boxes.Bytes(text)
		}
	}
	row[n+1] = slab.topic(r.Topic)
	row[n+2] = slab.boxes.Int64(int64(r.Partition))
	row[n+3] = slab.boxes.Int64(r.Offset)
	row[n+4] = slab.timestamp(r.Timestamp)
	f.row = row
	return f
}

// add appends the row of a record, or handles it as malformed.
func (b *rowBatch) add(tp topicPartition, f *fetched) {
	if b.lastPart < 0 || tp != b.last {
		b.last, b.lastPart = tp, b.index[tp]
	}
	b.newest[b.lastPart] = max(b.newest[b.lastPart], f.tsMs)
	switch {
	case b.err != nil || f.control:
	case f.bad != nil:
		b.bad(f.rec, f.bad)
	case b.emit != nil:
		b.chunk = append(b.chunk, f.row)
	default:
		b.parts[b.lastPart] = append(b.parts[b.lastPart], f.row)
	}
}

func (b *rowBatch) bad(r *kgo.Record, err error) {
	switch b.s.onMalformed {
	case v1.MalformedSkip:
		b.malformed++
	case v1.MalformedDeadLetter:
		b.malformed++
		line, _ := json.Marshal(deadLetter{
			Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
			Key: keyString(r.Key), Value: string(r.Value), Reason: err.Error(),
		})
		b.dead.Write(line)
		b.dead.WriteByte('\n')
	default:
		b.err = fmt.Errorf("malformed record at topic %s partition %d offset %d: %w (onMalformed: fail)", r.Topic, r.Partition, r.Offset, err)
	}
}

// deadLetter is one line of a dead-letter file.
type deadLetter struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Key       *string `json:"key"`
	Value     string  `json:"value"`
	Reason    string  `json:"reason"`
}

func keyString(k []byte) *string {
	if k == nil {
		return nil
	}
	s := string(k)
	return &s
}

// flushDeadLetters writes the batch's malformed records to
// <deadLetterPath>/<query id>/<source>/<batch>.jsonl, the same file again on a
// replay.
func (b *rowBatch) flushDeadLetters(ctx context.Context) error {
	if b.dead.Len() == 0 || b.s.deadLetter == nil {
		return nil
	}
	key := path.Join(b.s.queryID, b.s.name, fmt.Sprintf("%020d.jsonl", b.batch))
	if err := b.s.deadLetter.Put(ctx, key, b.dead.Bytes()); err != nil {
		return fmt.Errorf("write dead letters %s: %w", key, err)
	}
	return nil
}
