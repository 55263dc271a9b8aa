package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/codec"
)

var (
	_ engine.Sink        = (*Sink)(nil)
	_ engine.ChunkWriter = (*Sink)(nil)
	_ io.Closer          = (*Sink)(nil)
)

// Names the sink uses in Kafka.
const (
	// BatchHeader is the header every produced record carries:
	// <query id>:<batch id>, the same key a webhook sink sends.
	BatchHeader = "lockstep-batch"
	// MarkerTopic receives one small record per exactly-once transaction
	// (key: <query id>:<topic>, value: batch id), committed atomically with the
	// batch's records, so that a restarted sink can find whether a replayed
	// batch was committed. The sink creates it (one partition) when missing.
	MarkerTopic = "_lockstep_batches"
	// TransactionalIDPrefix starts the transactional id of an exactly-once
	// sink; the query id follows.
	TransactionalIDPrefix = "lockstep-"
)

// transactionTimeout is generous: a run that dies mid-transaction has its
// transaction aborted by the next run's start, not by the timeout.
const transactionTimeout = 5 * time.Minute

// SinkSpec describes the Kafka sink for the registry and the docs.
func SinkSpec() engine.ComponentSpec {
	return engine.ComponentSpec{
		Summary: "Produces each output row as a Kafka record whose value is the row as a JSON object.",
		Fields: []engine.FieldSpec{
			{Name: "bootstrapServers", Description: "host:port of brokers of one cluster"},
			{Name: "topic", Description: "the topic that receives the records"},
			{Name: "keyColumn", Default: "none", Description: "an output column whose value, as a string, is the record key"},
			{Name: "format", Default: "json", Description: "json: the row as an object, timestamps as RFC 3339"},
			{Name: "exactlyOnce", Default: "false", Description: "one transaction per batch (transactional id lockstep-<query id>), with a marker in " + MarkerTopic + "; readers use read_committed"},
			{Name: "sasl", Description: "PLAIN or SCRAM credentials from environment variables"},
			{Name: "tls", Description: "CA, client certificate and server name"},
		},
	}
}

// Sink produces rows to a Kafka topic. See the package documentation. The
// engine calls Write from one goroutine at a time.
type Sink struct {
	spec        v1.KafkaSink
	queryID     string
	cols        v1.Columns
	key         int          // index of the key column, -1 for none
	enc         valueEncoder // formats avro and protobuf: encodes values with the registered schema
	keyEnc      keyEncoder   // encodes the key column's values in keyFormat; nil without a key column
	exactlyOnce bool
	log         *slog.Logger
	reached     func(engine.Phase, int64)
	opts        options
	conn        conn

	// base are the client options; an exactly-once sink's client adds the
	// transactional id of the query it writes for (clientQuery).
	base        []kgo.Opt
	cl          *kgo.Client
	adm         *kadm.Client
	clientQuery string
	// written is the newest batch this instance committed for clientQuery,
	// -1 before one; checked tells whether the first write looked for a
	// committed replay.
	written int64
	checked bool

	// chunks are the chunks of records no longer in flight, for produce
	// to fill again; promises return them, on franz-go's goroutines. At
	// most maxBuffered/sendChunkRows + 1 chunks exist.
	chunksMu sync.Mutex
	chunks   []*sendChunk
}

func newSink(ctx context.Context, spec *v1.Sink, env engine.SinkEnv, o options) (engine.Sink, error) {
	if spec.Kafka == nil {
		return nil, errors.New("not a kafka sink")
	}
	log := env.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sink{
		spec:        *spec.Kafka.DeepCopy(),
		queryID:     env.QueryID,
		cols:        env.Columns,
		key:         -1,
		exactlyOnce: spec.Kafka.ExactlyOnce,
		log:         log,
		reached:     env.Reached,
		opts:        o,
		written:     -1,
	}
	if s.reached == nil {
		s.reached = func(engine.Phase, int64) {}
	}
	registry, errs := s.encoding(spec, env.Columns, o.env(env.Getenv))
	c, err := newConn(spec.Kafka.BootstrapServers, spec.Kafka.SASL, spec.Kafka.TLS, o, o.env(env.Getenv), log)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if registry != nil && spec.Kafka.Format.UsesSchemaRegistry() {
		// Before any record: a schema the subject's rule refuses stops the sink here.
		enc, err := newValueEncoder(ctx, registry, spec.Kafka.Format, spec.Kafka.SchemaRegistry, valueSubject(spec.Kafka.SchemaRegistry, spec.Kafka.Topic), env.Columns)
		if err != nil {
			return nil, err
		}
		s.enc = enc
	}
	if s.key >= 0 {
		enc, err := newKeyEncoder(ctx, registry, spec.Kafka.KeyFormat, spec.Kafka.SchemaRegistry, keySubject(spec.Kafka.Topic), env.Columns[s.key])
		if err != nil {
			return nil, err
		}
		s.keyEnc = enc
	}
	s.conn = c
	s.base = append(c.opts,
		kgo.DefaultProduceTopic(spec.Kafka.Topic),
		kgo.MaxBufferedRecords(maxBuffered),
		kgo.ProducerBatchMaxBytes(1<<20),
		kgo.RecordRetries(math.MaxInt32),
	)
	if err := s.newClient(s.queryID); err != nil {
		return nil, err
	}
	if _, err := connect(ctx, s.cl, c, o.connectTimeout); err != nil {
		s.cl.Close()
		return nil, err
	}
	if !s.exactlyOnce {
		// Get the idempotent producer's id now rather than in the first
		// batch. (An exactly-once sink gets its transactional one, which
		// fences the query's previous producer, in its first Write.)
		if _, _, err := s.cl.ProducerID(ctx); err != nil {
			s.cl.Close()
			return nil, fmt.Errorf("initialize producer: %w", err)
		}
	}
	if s.exactlyOnce {
		if err := s.ensureMarkerTopic(ctx); err != nil {
			s.cl.Close()
			return nil, err
		}
	}
	return s, nil
}

// encoding checks how the sink encodes records of the output columns cols: the key column
// and the formats, and returns the Schema Registry client they need (nil if none). errs are
// what is wrong with the spec.
func (s *Sink) encoding(spec *v1.Sink, cols v1.Columns, getenv func(string) string) (registry *sr.Client, errs []error) {
	if k := spec.Kafka.KeyColumn; k != "" {
		for i, c := range cols {
			if c.Name == k {
				s.key = i
			}
		}
		if s.key < 0 {
			errs = append(errs, fmt.Errorf("keyColumn %q is not an output column (%v)", k, cols.Names()))
		}
	}
	switch f := spec.Kafka.Format; f {
	case "", v1.KafkaJSON, v1.KafkaAvro, v1.KafkaProtobuf, v1.KafkaJSONSchema:
	default:
		errs = append(errs, fmt.Errorf("format %q: the Kafka sink writes json, jsonSchema, avro or protobuf", f))
	}
	if f, kf := spec.Kafka.Format, spec.Kafka.KeyFormat; f.UsesSchemaRegistry() || kf.UsesSchemaRegistry() && s.key >= 0 {
		if spec.Kafka.SchemaRegistry == nil {
			errs = append(errs, fmt.Errorf("format %s, keyFormat %s need schemaRegistry", f, kf))
		} else if cl, err := newRegistryClient(spec.Kafka.SchemaRegistry, getenv); err != nil {
			errs = append(errs, err)
		} else {
			registry = cl
		}
	}
	return registry, errs
}

// newClient replaces the sink's client with one for query: transactional,
// with the query's transactional id, when the sink is exactly-once.
func (s *Sink) newClient(query string) error {
	opts := s.base
	if s.exactlyOnce && query != "" {
		opts = append(slices.Clip(opts), kgo.TransactionalID(TransactionalIDPrefix+query), kgo.TransactionTimeout(transactionTimeout))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	if s.cl != nil {
		s.cl.Close()
	}
	s.cl, s.adm, s.clientQuery = cl, kadm.NewClient(cl), query
	s.written, s.checked = -1, false
	return nil
}

// Write produces the batch's rows and returns once the brokers acknowledged
// them (at-least-once) or the batch's transaction committed (exactly-once):
// Open, one Write of every row, Commit.
func (s *Sink) Write(ctx context.Context, b *engine.Batch) error { return engine.WriteWhole(ctx, s, b) }

// Open begins writing batch b (engine.ChunkWriter). An exactly-once sink
// first fences any producer of an earlier run of the query and, on its first
// batch or for a batch it already wrote, looks for the batch's marker: a
// committed batch is not produced again (its writer drops the rows). Then it
// begins the batch's transaction.
func (s *Sink) Open(ctx context.Context, b *engine.Batch) (engine.BatchWriter, error) {
	w := &batchWriter{s: s, b: b, hdr: []kgo.RecordHeader{{Key: BatchHeader, Value: []byte(b.QueryID + ":" + strconv.FormatInt(b.ID, 10))}},
		acks: &batchWrite{}}
	if !s.exactlyOnce {
		return w, nil
	}
	if b.QueryID != s.clientQuery {
		// Transactions are per query id: a batch of another query (a
		// fresh checkpoint) gets a producer of its own.
		if err := s.newClient(b.QueryID); err != nil {
			return nil, err
		}
	}
	if !s.checked || b.ID <= s.written {
		// Fence the previous run's producer first: its open transaction is
		// aborted, or its commit completes, before the marker is read.
		if _, _, err := s.cl.ProducerID(ctx); err != nil {
			return nil, fmt.Errorf("initialize transactional producer %s: %w", TransactionalIDPrefix+b.QueryID, err)
		}
		found, err := s.committed(ctx, b)
		if err != nil {
			return nil, err
		}
		s.checked = true
		if found {
			s.log.Info("Skipped a batch already committed to Kafka", "batch", b.ID, "topic", s.spec.Topic)
			s.written = max(s.written, b.ID)
			w.skip = true
			return w, nil
		}
	}
	if err := s.cl.BeginTransaction(); err != nil {
		return nil, fmt.Errorf("begin transaction for batch %d: %w", b.ID, err)
	}
	w.txn = true
	return w, nil
}

// batchWriter produces one batch (engine.BatchWriter): its records go out as
// Write encodes them, and Commit waits for them all and commits.
type batchWriter struct {
	s    *Sink
	b    *engine.Batch
	hdr  []kgo.RecordHeader
	acks *batchWrite
	// skip: the batch was committed before, nothing is produced; txn: a
	// transaction is open.
	skip, txn bool
}

func (w *batchWriter) Write(ctx context.Context, rows []engine.Row) error {
	if w.skip {
		return nil
	}
	if err := w.acks.failed(); err != nil {
		return w.fail(ctx, fmt.Errorf("produce batch %d to topic %s: %w", w.b.ID, w.s.spec.Topic, err))
	}
	if err := w.s.produce(ctx, w.b, w.hdr, w.acks, rows); err != nil {
		return w.fail(ctx, err)
	}
	return nil
}

// Commit produces the marker when transactional, waits for the brokers'
// acknowledgements of every record, and commits the transaction.
func (w *batchWriter) Commit(ctx context.Context) error {
	if w.skip {
		return nil
	}
	s, b := w.s, w.b
	if w.txn {
		w.acks.pending.Add(1)
		r := &kgo.Record{Topic: MarkerTopic, Key: []byte(s.markerKey(b)), Value: []byte(strconv.FormatInt(b.ID, 10)),
			Headers: w.hdr, Timestamp: b.Time}
		s.cl.Produce(ctx, r, func(_ *kgo.Record, err error) { w.acks.done(err) })
	}
	if err := s.cl.Flush(ctx); err != nil {
		return w.fail(ctx, fmt.Errorf("produce batch %d: %w", b.ID, err))
	}
	// Flush returns once every buffered record is done; this also waits
	// for the promises of records that failed before they were buffered.
	w.acks.pending.Wait()
	if w.acks.err != nil {
		return w.fail(ctx, fmt.Errorf("produce batch %d to topic %s: %w", b.ID, s.spec.Topic, w.acks.err))
	}
	s.reached(engine.PhaseSinkWrite, b.ID)
	if !w.txn {
		return nil
	}
	w.txn = false
	if err := s.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return s.abort(ctx, b, fmt.Errorf("commit transaction of batch %d: %w", b.ID, err))
	}
	s.written = b.ID
	return nil
}

// Abort ends the open transaction, if any.
func (w *batchWriter) Abort(ctx context.Context) {
	if w.txn {
		w.txn = false
		w.s.endAborted(ctx, w.b)
	}
}

// endAborted aborts the open transaction of batch b: first the records not
// sent yet, so that none goes out after the abort, then the transaction.
func (s *Sink) endAborted(ctx context.Context, b *engine.Batch) {
	err := s.cl.AbortBufferedRecords(ctx)
	if err == nil {
		err = s.cl.EndTransaction(ctx, kgo.TryAbort)
	}
	if err != nil {
		s.log.Warn("Aborting the Kafka transaction failed; the next start aborts it", "batch", b.ID, "error", err)
	}
}

// fail ends the batch's transaction after err (abort), and returns err, or
// nil when another producer of the query committed the batch.
func (w *batchWriter) fail(ctx context.Context, err error) error {
	if !w.txn {
		return err
	}
	w.txn = false
	if err = w.s.abort(ctx, w.b, err); err == nil {
		w.skip = true // the batch is committed: what is left to write is dropped
	}
	return err
}

// abort ends the open transaction after err. When another producer of this
// query fenced this one, it waits for that producer to commit the batch.
func (s *Sink) abort(ctx context.Context, b *engine.Batch, err error) error {
	s.endAborted(ctx, b)
	if !fenced(err) {
		return err
	}
	deadline := time.Now().Add(s.opts.brokerTimeout)
	for time.Now().Before(deadline) {
		found, cerr := s.committed(ctx, b)
		if cerr != nil {
			return errors.Join(err, cerr)
		}
		if found {
			s.log.Warn("Another producer of this query committed the batch", "batch", b.ID, "error", err)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%w: another engine runs query %s (its producer fenced this one)", err, b.QueryID)
}

// fenced reports whether err means that another producer took over the
// query's transactional id. Besides PRODUCER_FENCED and INVALID_PRODUCER_EPOCH
// that is INVALID_TXN_STATE: under KIP-890 (transaction version 2) a commit
// sent after another producer's InitProducerID bumped the epoch by one and
// aborted this transaction, before that producer began its own, looks to the
// coordinator like a retry of an EndTxn that ended in an abort, and a commit
// cannot follow an abort (kfake answers so, and so can Apache Kafka's
// endTransaction, "retryOnEpochBump"). Two engines starting the same query,
// or a restart while the old run commits, meet this race.
func fenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.InvalidTxnState)
}

// produce encodes rows of batch b and hands them to the client, a chunk at a
// time, so that the client sends the first records while the next are
// encoded, and a chunk's records and buffers serve again once the brokers
// acknowledged them. Their acknowledgements go to acks.
func (s *Sink) produce(ctx context.Context, b *engine.Batch, hdr []kgo.RecordHeader, acks *batchWrite, rows []engine.Row) error {
	for lo := 0; lo < len(rows); lo += sendChunkRows {
		if err := s.produceChunk(ctx, b, hdr, acks, rows[lo:min(lo+sendChunkRows, len(rows))]); err != nil {
			return err
		}
	}
	return nil
}

// produceChunk encodes and produces at most sendChunkRows rows.
func (s *Sink) produceChunk(ctx context.Context, b *engine.Batch, hdr []kgo.RecordHeader, acks *batchWrite, rows []engine.Row) error {
	c := s.takeChunk()
	var err error
	c.ends = c.ends[:0]
	if s.enc != nil {
		c.values = c.values[:0]
		for _, row := range rows {
			if c.values, err = s.enc.append(c.values, row); err != nil {
				s.giveChunk(c)
				return fmt.Errorf("encode batch %d: %w", b.ID, err)
			}
			c.ends = append(c.ends, len(c.values))
		}
	} else if c.values, err = codec.AppendJSON(c.values[:0], b.Columns, rows); err != nil {
		s.giveChunk(c)
		return fmt.Errorf("encode batch %d: %w", b.ID, err)
	}
	c.keys, c.keyEnds = c.keys[:0], c.keyEnds[:0]
	if s.key >= 0 {
		for _, row := range rows {
			if row[s.key] == nil {
				continue
			}
			if c.keys, err = s.keyEnc.append(c.keys, row[s.key]); err != nil {
				s.giveChunk(c)
				return fmt.Errorf("encode the key of batch %d: %w", b.ID, err)
			}
			c.keyEnds = append(c.keyEnds, len(c.keys))
		}
	}
	c.write = acks
	c.left.Store(int32(len(rows)))
	acks.pending.Add(len(rows))
	values := c.values
	start, k, keyStart := 0, 0, 0
	for i, row := range rows {
		r := &c.recs[i]
		if s.enc != nil {
			end := c.ends[i]
			*r = kgo.Record{Value: values[start:end:end], Headers: hdr, Timestamp: b.Time}
			start = end
		} else {
			end := bytes.IndexByte(values, '\n')
			*r = kgo.Record{Value: values[:end:end], Headers: hdr, Timestamp: b.Time}
			values = values[end+1:]
		}
		if s.key >= 0 && row[s.key] != nil {
			end := c.keyEnds[k]
			r.Key = c.keys[keyStart:end:end]
			keyStart = end
			k++
		}
		s.cl.Produce(ctx, r, c.promise)
	}
	return nil
}

// sendChunkRows is how many rows the sink encodes and produces at a time.
const sendChunkRows = 4096

// maxBuffered is how many records the client buffers before Produce waits
// for acknowledgements.
const maxBuffered = 100_000

// batchWrite is what the promises of one batch's records report to.
type batchWrite struct {
	pending sync.WaitGroup // a record each
	mu      sync.Mutex
	err     error // the first error, read after pending
}

// failed returns the first error a record of the batch met so far.
func (w *batchWrite) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *batchWrite) done(err error) {
	if err != nil {
		w.mu.Lock()
		if w.err == nil {
			w.err = err
		}
		w.mu.Unlock()
	}
	w.pending.Done()
}

// sendChunk holds a chunk of records in flight and the buffers their keys
// and values are cut from. Once the promise of its last record ran, it goes
// back to its sink's free chunks: franz-go is done with the records.
type sendChunk struct {
	recs    []kgo.Record
	values  []byte
	ends    []int // formats avro and protobuf: where each record's value ends in values
	keys    []byte
	keyEnds []int // where each key ends in keys, for the rows whose key is not null
	write   *batchWrite
	left    atomic.Int32 // records whose promise did not run yet
	promise func(*kgo.Record, error)
}

// takeChunk returns a free chunk, or a new one.
func (s *Sink) takeChunk() *sendChunk {
	s.chunksMu.Lock()
	defer s.chunksMu.Unlock()
	if n := len(s.chunks); n > 0 {
		c := s.chunks[n-1]
		s.chunks = s.chunks[:n-1]
		return c
	}
	c := &sendChunk{recs: make([]kgo.Record, sendChunkRows)}
	c.promise = func(_ *kgo.Record, err error) {
		w := c.write // before c may serve another batch
		if c.left.Add(-1) == 0 {
			s.giveChunk(c)
		}
		w.done(err)
	}
	return c
}

// giveChunk returns a chunk that produced nothing to the free chunks.
func (s *Sink) giveChunk(c *sendChunk) {
	s.chunksMu.Lock()
	s.chunks = append(s.chunks, c)
	s.chunksMu.Unlock()
}

// markerKey is the key of a batch's marker: <query id>:<topic>. The topic
// is part of it so that a query whose sink moved to another topic writes a
// replayed batch there.
func (s *Sink) markerKey(b *engine.Batch) string { return b.QueryID + ":" + s.spec.Topic }

// appendKey appends a key column's value (not null) as a string.
func appendKey(b []byte, v any) []byte {
	switch v := v.(type) {
	case string:
		return append(b, v...)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case float64:
		return strconv.AppendFloat(b, v, 'g', -1, 64)
	case bool:
		return strconv.AppendBool(b, v)
	case time.Time:
		return v.UTC().AppendFormat(b, time.RFC3339Nano)
	}
	return fmt.Append(b, v)
}

// committed reports whether a committed transaction holds the marker of
// batch b: it reads the marker topic with read_committed from the first
// record stamped at or after the batch's time to the topic's end when the
// check began, once every transaction open then has ended (stable). Apache
// Kafka writes a transaction's commit markers after it answered EndTxn, so
// the marker of a batch this client has just committed can lie beyond the
// last stable offset for a moment: a check that read only up to that offset
// missed it, and a replay of the batch produced it again.
func (s *Sink) committed(ctx context.Context, b *engine.Batch) (bool, error) {
	var spans []span
	err := withRetry(ctx, s.opts.brokerTimeout, "list Kafka marker offsets", s.log, func(ctx context.Context) error {
		spans = nil
		from, err := s.adm.ListOffsetsAfterMilli(ctx, b.Time.UnixMilli(), MarkerTopic)
		if err != nil {
			return err
		}
		to, err := s.adm.ListEndOffsets(ctx, MarkerTopic)
		if err != nil {
			return err
		}
		fo, err := listed(from)
		if err != nil {
			return err
		}
		tos, err := listed(to)
		if err != nil {
			return err
		}
		for _, tp := range tos.partitions() {
			hi, _ := tos.get(tp)
			lo, ok := fo.get(tp)
			if !ok || lo < 0 {
				lo = hi
			}
			if lo < hi {
				spans = append(spans, span{tp: tp, from: lo, to: hi})
			}
		}
		return nil
	})
	if err != nil || len(spans) == 0 {
		return false, err
	}
	if err := s.stable(ctx, spans); err != nil {
		return false, err
	}
	key, want := s.markerKey(b), strconv.FormatInt(b.ID, 10)
	found := false
	err = scan(ctx, s.conn, spans, func(r *kgo.Record) bool {
		if !r.Attrs.IsControl() && string(r.Key) == key && string(r.Value) == want {
			found = true
		}
		return found
	})
	if err != nil {
		return false, fmt.Errorf("read markers in %s: %w", MarkerTopic, err)
	}
	return found, nil
}

// stable waits until the last stable offset of each span's partition has
// reached the span's end: every transaction that was open in the marker
// topic when the check began has committed or aborted. It gives up after
// the broker timeout (a transaction of another query may stay open up to
// its batch's length).
func (s *Sink) stable(ctx context.Context, spans []span) error {
	deadline := time.Now().Add(s.opts.brokerTimeout)
	var last error
	for backoff := 10 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		l, err := s.adm.ListCommittedOffsets(ctx, MarkerTopic)
		var lso offsets
		if err == nil {
			lso, err = listed(l)
		}
		if err == nil {
			last = nil
			for _, sp := range spans {
				if o, _ := lso.get(sp.tp); o < sp.to {
					last = fmt.Errorf("partition %d is stable up to offset %d, not yet %d: a transaction is open", sp.tp.partition, o, sp.to)
				}
			}
			if last == nil {
				return nil
			}
		} else {
			last = err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("wait for the transactions in %s to end: %w", MarkerTopic, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
	}
}

// ensureMarkerTopic creates MarkerTopic with one partition if it is missing.
func (s *Sink) ensureMarkerTopic(ctx context.Context) error {
	return withRetry(ctx, s.opts.brokerTimeout, "create "+MarkerTopic, s.log, func(ctx context.Context) error {
		resp, err := s.adm.CreateTopic(ctx, 1, -1, nil, MarkerTopic)
		if err == nil {
			err = resp.Err
		}
		if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		return fmt.Errorf("create topic %s (the exactly-once sink's batch markers): %w", MarkerTopic, err)
	})
}

// Close closes the sink's client.
func (s *Sink) Close() error {
	s.cl.Close()
	return nil
}

// scan reads the spans with read_committed on a client of its own until each
// is done or fn returns true.
func scan(ctx context.Context, c conn, spans []span, fn func(*kgo.Record) bool) error {
	parts := map[string]map[int32]kgo.Offset{}
	pending := map[topicPartition]int64{}
	for _, sp := range spans {
		if parts[sp.tp.topic] == nil {
			parts[sp.tp.topic] = map[int32]kgo.Offset{}
		}
		parts[sp.tp.topic][sp.tp.partition] = kgo.NewOffset().At(sp.from)
		pending[sp.tp] = sp.to
	}
	cl, err := kgo.NewClient(append(c.opts,
		kgo.ConsumePartitions(parts),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMaxWait(250*time.Millisecond),
	)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for len(pending) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if errors.Is(err, kerr.OffsetOutOfRange) {
				// Retention removed markers: what is gone cannot be found.
				delete(pending, topicPartition{t, p})
				return
			}
			ferr = errors.Join(ferr, fmt.Errorf("topic %s partition %d: %w", t, p, err))
		})
		if ferr != nil {
			return ferr
		}
		stop := false
		fs.EachRecord(func(r *kgo.Record) {
			tp := topicPartition{r.Topic, r.Partition}
			to, ok := pending[tp]
			if stop || !ok {
				return
			}
			if r.Offset < to && fn(r) {
				stop = true
			}
			if r.Offset >= to-1 {
				delete(pending, tp)
			}
		})
		if stop {
			return nil
		}
	}
	return nil
}
