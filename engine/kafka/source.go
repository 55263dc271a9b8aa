package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine"
)

var (
	_ engine.ChunkReader        = (*Source)(nil)
	_ engine.Source             = (*Source)(nil)
	_ engine.AvailableNowSource = (*Source)(nil)
	_ engine.RetainingSource    = (*Source)(nil)
	_ io.Closer                 = (*Source)(nil)
)

// StartKey is the key, in a source's checkpoint folder (sources/<name>/),
// of the record of where the source started and on which cluster.
const StartKey = "kafka-start.json"

// fetchPartitionBytes bounds what one fetch returns per partition (Kafka
// still returns a larger first batch whole). The client holds up to two
// fetches on top of the records the reader decoded ahead (prefetchLimit): at
// franz-go's default of 1 MiB, a fetch of four partitions of compressed JSON
// held some 280,000 records, 80 MB once parsed, which doubled the heap and
// cost more in page faults and garbage collection than the fewer requests
// saved.
const fetchPartitionBytes = 256 << 10

// stallCheck is how long a read waits for records it knows exist before it
// asks the brokers whether they are still there.
const stallCheck = 5 * time.Second

// SourceSpec describes the Kafka source for the registry and the docs.
func SourceSpec() engine.ComponentSpec {
	return engine.ComponentSpec{
		Summary: "Reads Kafka topics (read_committed, no consumer group); the checkpoint's offsets are the next offset " +
			"to read per topic-partition, and a replayed batch reads exactly its logged range.",
		Fields: []engine.FieldSpec{
			{Name: "bootstrapServers", Description: "host:port of brokers of one cluster; the cluster id is recorded and checked at start"},
			{Name: "topics", Description: "topics to read (or topicPattern)"},
			{Name: "topicPattern", Description: "RE2 expression matched against whole topic names (or topics)"},
			{Name: "startingOffsets", Default: "latest", Description: "earliest, latest or {\"topic\":{\"0\":12}} (-2 earliest, -1 latest); used only when the source is new to the checkpoint"},
			{Name: "maxOffsetsPerTrigger", Default: "none", Description: "records per batch, split across partitions in proportion to their backlog"},
			{Name: "failOnDataLoss", Default: "true", Description: "stop when records to read are gone (retention, DeleteRecords, deleted partitions); false: warn, count and continue at the earliest"},
			{Name: "format", Default: "json", Description: "json, csv or raw (a string column value)"},
			{Name: "sasl", Description: "PLAIN or SCRAM credentials from environment variables"},
			{Name: "tls", Description: "CA, client certificate and server name"},
		},
	}
}

// DataLossError means records the query should read are gone.
type DataLossError struct {
	Topic     string
	Partition int32
	// From is the first offset the query still had to read.
	From int64
	// Available is the first offset still in the partition (its log start),
	// or -1 when the partition itself is gone.
	Available int64
	// Why says what happened, for the message.
	Why string
}

func (e *DataLossError) Error() string {
	var what string
	switch {
	case e.Available < 0:
		what = fmt.Sprintf("topic %s partition %d is gone while offset %d was still to be read (%s)", e.Topic, e.Partition, e.From, e.Why)
	case e.Available > e.From:
		what = fmt.Sprintf("topic %s partition %d: records at offsets %d to %d are gone, the partition now starts at %d (%s)",
			e.Topic, e.Partition, e.From, e.Available-1, e.Available, e.Why)
	default:
		what = fmt.Sprintf("topic %s partition %d: offset %d is beyond the partition's end %d (%s)", e.Topic, e.Partition, e.From, e.Available, e.Why)
	}
	return what + "; set failOnDataLoss: false to continue from the earliest available offset"
}

// startRecord is what a source new to the checkpoint decided, kept in
// StartKey: the cluster it reads and the offsets it starts from.
type startRecord struct {
	ClusterID       string  `json:"clusterId"`
	StartingOffsets string  `json:"startingOffsets"`
	Offsets         offsets `json:"offsets"`
}

// Source reads Kafka topics. See the package documentation. The engine uses
// it from one goroutine at a time.
type Source struct {
	name        string
	queryID     string
	spec        v1.KafkaSource
	pattern     *regexp.Regexp
	failOnLoss  bool
	maxOffsets  int64
	onMalformed v1.MalformedPolicy
	deadLetter  checkpoint.Store
	dec         *decoder
	// key decodes keys of a keyFormat other than string into _key; nil for string.
	key   *keyDecoder
	width int // columns of a row: the record's and the metadata
	store checkpoint.Store
	log   *slog.Logger
	opts  options

	cl        *kgo.Client
	adm       *kadm.Client
	clusterID string
	start     *startRecord
	// until bounds an availableNow run; nil otherwise.
	until  offsets
	reader *reader
	lost   atomic.Int64
	// newest is the newest record timestamp (Unix ms) read per partition by
	// this process.
	newest map[topicPartition]int64
}

func newSource(ctx context.Context, spec *v1.Source, env engine.SourceEnv, o options) (engine.Source, error) {
	if spec.Kafka == nil {
		return nil, errors.New("not a kafka source")
	}
	log := env.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{
		name:        env.Name,
		queryID:     env.QueryID,
		spec:        *spec.Kafka.DeepCopy(),
		failOnLoss:  spec.Kafka.FailOnDataLoss == nil || *spec.Kafka.FailOnDataLoss,
		onMalformed: spec.OnMalformed,
		store:       env.Store,
		log:         log,
		opts:        o,
	}
	if m := spec.Kafka.MaxOffsetsPerTrigger; m != nil {
		s.maxOffsets = *m
	}
	cols, registry, errs := s.decoding(spec, o.env(env.Getenv))
	s.width = len(cols) + len(v1.KafkaMetadataColumns())
	if p := spec.Kafka.TopicPattern; p != "" {
		re, err := regexp.Compile("^(?:" + p + ")$")
		if err != nil {
			errs = append(errs, fmt.Errorf("topicPattern: %w", err))
		}
		s.pattern = re
	}
	if _, err := spec.Kafka.StartingPartitionOffsets(); err != nil {
		errs = append(errs, fmt.Errorf("startingOffsets: %w", err))
	}
	if s.onMalformed == v1.MalformedDeadLetter {
		f, err := env.Open(spec.DeadLetterPath)
		if err != nil {
			errs = append(errs, fmt.Errorf("deadLetterPath: %w", err))
		}
		s.deadLetter = f
	}
	c, err := newConn(spec.Kafka.BootstrapServers, spec.Kafka.SASL, spec.Kafka.TLS, o, o.env(env.Getenv), log)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s.cl, err = kgo.NewClient(append(c.opts, consumerOpts()...)...)
	if err != nil {
		return nil, err
	}
	s.adm = kadm.NewClient(s.cl)
	s.reader = newReader(s.cl, s.decode, env.Wake)
	if s.clusterID, err = connect(ctx, s.cl, c, o.connectTimeout); err != nil {
		s.cl.Close()
		return nil, err
	}
	if err := s.loadStart(ctx); err != nil {
		s.cl.Close()
		return nil, err
	}
	if reg := spec.Kafka.SchemaRegistry; registry != nil && (reg.Subject != "" || len(spec.Kafka.Topics) > 0) {
		topic := ""
		if len(spec.Kafka.Topics) > 0 {
			topic = spec.Kafka.Topics[0]
		}
		if err := checkLatest(ctx, registry, valueSubject(reg, topic), cols); err != nil {
			s.cl.Close()
			return nil, err
		}
	}
	return s, nil
}

// decoding sets up how s decodes record values and keys: the columns it reads, and the
// decoders of its format and key format, with their Schema Registry client (registry, nil
// when the values do not use one). errs are what is wrong with the spec.
func (s *Source) decoding(spec *v1.Source, getenv func(string) string) (cols v1.Columns, registry *sr.Client, errs []error) {
	switch {
	case spec.Kafka.Format == v1.KafkaRaw:
		cols = v1.Columns{{Name: v1.ColumnKafkaValue, Type: v1.TypeString}}
	case spec.Schema != nil:
		cols = spec.Schema.Columns
	default:
		errs = append(errs, errors.New("a schema is required unless format is raw"))
	}
	s.dec = newDecoder(spec.Kafka.Format, cols)
	var keyRegistry *sr.Client
	if f, kf := spec.Kafka.Format, spec.Kafka.KeyFormat; f.UsesSchemaRegistry() || kf.UsesSchemaRegistry() {
		if spec.Kafka.SchemaRegistry == nil {
			errs = append(errs, fmt.Errorf("format %s, keyFormat %s need schemaRegistry", f, kf))
		} else if cl, err := newRegistryClient(spec.Kafka.SchemaRegistry, getenv); err != nil {
			errs = append(errs, err)
		} else if keyRegistry = cl; f.UsesSchemaRegistry() {
			registry = cl
			s.dec.avro, s.dec.proto = newAvroDecoder(cl, cols), newProtoDecoder(cl, cols)
			s.dec.json = newJSONSchemaDecoder(cl, s.dec.dec)
		}
	}
	switch kf := spec.Kafka.KeyFormat; kf {
	case "", v1.KafkaKeyString:
	case v1.KafkaJSON, v1.KafkaAvro, v1.KafkaProtobuf:
		s.key = newKeyDecoder(kf, keyRegistry)
	default:
		errs = append(errs, fmt.Errorf("keyFormat %q: the Kafka source reads keys as string, json, avro or protobuf", kf))
	}
	return cols, registry, errs
}

// consumerOpts are the client options of a source's reads.
func consumerOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Control records mark the offsets a transaction's marker takes, so a
		// read knows it reached the end of its range.
		kgo.KeepControlRecords(),
		// Out of range is data loss, handled here, never a silent reset.
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMaxWait(time.Second),
		kgo.FetchMaxPartitionBytes(fetchPartitionBytes),
		// No fetch sessions (KIP-227): franz-go v1.22.3's Close ends a session while the
		// background fetch may be building its request from it (a data race the race detector
		// caught in this package's tests), and a source reads too few partitions for the
		// sessions' smaller requests to matter.
		kgo.DisableFetchSessions(),
	}
}

// loadStart reads the start record of a source already in the checkpoint,
// and refuses to read another cluster than the one it recorded.
func (s *Source) loadStart(ctx context.Context) error {
	data, err := s.store.Get(ctx, StartKey)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", StartKey, err)
	}
	var rec startRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return fmt.Errorf("read %s: %w", StartKey, err)
	}
	if rec.Offsets == nil {
		rec.Offsets = offsets{}
	}
	if rec.ClusterID != s.clusterID {
		return fmt.Errorf("%w: source %s read Kafka cluster %q and its offsets mean nothing on cluster %q at %v; "+
			"point bootstrapServers back at the first cluster, or give the source a new name (it then starts at startingOffsets)",
			engine.ErrRefused, s.name, rec.ClusterID, s.clusterID, s.spec.BootstrapServers)
	}
	s.start = &rec
	return nil
}

// Retained checks that every partition still holds what the committed batches read of it:
// from the recorded starting offset (0 for a partition that appeared later) up to end. Log
// retention or a deleteRecords that moved a partition's log start past that offset makes
// a rebuild of the state impossible (engine.RetainingSource).
func (s *Source) Retained(ctx context.Context, end engine.Offset) error {
	var from engine.Offset
	if s.start != nil {
		from = s.start.Offsets.json()
	}
	return s.RetainedFrom(ctx, from, end)
}

// RetainedFrom is Retained from the starting offsets start ({"topic":{"partition":offset}},
// nil: every partition from 0) rather than the ones the source recorded: for the batches a
// log other than the source's own records (the Spark runtime's Kafka source keeps its
// starting offsets in Spark's checkpoint; engine/spark).
func (s *Source) RetainedFrom(ctx context.Context, start, end engine.Offset) error {
	ends, err := parseOffsets(end)
	if err != nil {
		return err
	}
	var from offsets
	if len(start) > 0 {
		if from, err = parseOffsets(start); err != nil {
			return err
		}
	}
	_, logStarts, err := s.list(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", engine.ErrRetentionUnknown, err)
	}
	for _, tp := range ends.partitions() {
		hi, _ := ends.get(tp)
		lo, _ := from.get(tp) // a partition the start record does not name was read from 0
		if hi <= lo {
			continue // nothing read
		}
		first, ok := logStarts.get(tp)
		switch {
		case !ok:
			//lint:ignore ST1005 the sentence names Kafka, a proper noun
			return fmt.Errorf("Kafka partition %s-%d is gone; the committed batches read its offsets %d–%d", tp.topic, tp.partition, lo, hi-1)
		case first > lo:
			//lint:ignore ST1005 the sentence names Kafka, a proper noun
			return fmt.Errorf("Kafka partition %s-%d starts at offset %d now; the committed batches read it from offset %d, so offsets %d–%d are gone (the topic's retention.ms or retention.bytes, or a deleteRecords, removed them)",
				tp.topic, tp.partition, first, lo, lo, first-1)
		}
	}
	return nil
}

// ClusterID returns the id of the cluster the source reads.
func (s *Source) ClusterID() string { return s.clusterID }

// LostRecords returns how many records the source skipped because they were
// gone (failOnDataLoss false), in this run.
func (s *Source) LostRecords() int64 { return s.lost.Load() }

// PrepareAvailableNow fixes the offsets an availableNow run reads up to: the
// partitions' last stable offsets now.
func (s *Source) PrepareAvailableNow(ctx context.Context, _ time.Time) error {
	latest, _, err := s.list(ctx)
	if err != nil {
		return err
	}
	s.until = latest
	return nil
}

// Plan returns the next offsets per partition: the partitions' last stable
// offsets, bounded by maxOffsetsPerTrigger when req.Limit is set (split in
// proportion to each partition's backlog) and by the availableNow bound.
// Partitions new since the start are read from offset 0. A start offset below
// a partition's log start, beyond its end, or in a partition that vanished is
// data loss: a *DataLossError, or (failOnDataLoss false) a warning.
func (s *Source) Plan(ctx context.Context, req engine.PlanRequest) (engine.Planned, error) {
	start, err := s.startOffsets(ctx, req.Start)
	if err != nil {
		return engine.Planned{}, err
	}
	latest, logStarts, err := s.list(ctx)
	if err != nil {
		return engine.Planned{}, err
	}
	if s.until != nil {
		for t, ps := range latest {
			for p, hi := range ps {
				bound, ok := s.until.get(topicPartition{t, p})
				if !ok {
					delete(ps, p)
				} else if bound < hi {
					ps[p] = bound
				}
			}
		}
	}
	spans, hasData, err := s.spans(start, latest, logStarts)
	if err != nil {
		return engine.Planned{}, err
	}
	if req.Limit && s.maxOffsets > 0 {
		limit(spans, s.maxOffsets)
	}
	// Start fetching the batch while the engine logs it. Outside an
	// availableNow run, partitions without new records are read too: the
	// reader waits on them for the next records, and wakes the engine when
	// they come.
	var reading []span
	for _, sp := range spans {
		if sp.from < sp.to || s.until == nil {
			reading = append(reading, sp)
		}
	}
	s.reader.assign(reading)
	end := offsets{}
	var lag int64
	behind := offsets{}
	for _, sp := range spans {
		end.set(sp.tp, sp.to)
		hi, _ := latest.get(sp.tp)
		lag += max(0, hi-sp.to)
		behind.set(sp.tp, max(0, hi-sp.to))
		if was, _ := start.get(sp.tp); was != sp.to {
			hasData = true
		}
	}
	if s.until != nil {
		// Keep the offsets of partitions outside the availableNow bound.
		for _, tp := range start.partitions() {
			if _, ok := end.get(tp); !ok {
				off, _ := start.get(tp)
				end.set(tp, off)
			}
		}
	}
	parts := make([]engine.PartitionLag, 0, len(spans))
	for _, tp := range behind.partitions() {
		n, _ := behind.get(tp)
		parts = append(parts, engine.PartitionLag{Topic: tp.topic, Partition: tp.partition, Lag: n})
	}
	return engine.Planned{End: end.json(), HasData: hasData, Backlog: engine.Backlog{Lag: &lag, Latest: latest.json(), Partitions: parts}}, nil
}

// spans are the ranges of the next batch per partition, from start to latest, before any
// limit: a start offset outside a partition's log (below logStarts, beyond latest) or in a
// partition that is gone is data loss, an error unless failOnDataLoss is false. dropped says
// that a partition gone from the cluster is dropped from the offsets.
func (s *Source) spans(start, latest, logStarts offsets) (spans []span, dropped bool, err error) {
	for _, tp := range latest.partitions() {
		hi, _ := latest.get(tp)
		lo, _ := logStarts.get(tp)
		from, known := start.get(tp)
		if !known {
			from = 0 // a new partition starts at the earliest offset
		}
		switch {
		case from < lo:
			if s.failOnLoss {
				return nil, false, &DataLossError{Topic: tp.topic, Partition: tp.partition, From: from, Available: lo,
					Why: "retention or DeleteRecords removed them"}
			}
			from = lo
		case from > hi && from > lo:
			if s.failOnLoss {
				return nil, false, &DataLossError{Topic: tp.topic, Partition: tp.partition, From: from, Available: hi,
					Why: "was the topic deleted and created again?"}
			}
			from = lo
			hi = max(hi, lo)
		}
		spans = append(spans, span{tp: tp, from: from, to: hi})
	}
	for _, tp := range start.partitions() {
		if _, ok := latest.get(tp); ok {
			continue
		}
		if s.until != nil {
			// Not part of this availableNow run: keep its offset.
			continue
		}
		off, _ := start.get(tp)
		if s.failOnLoss {
			return nil, false, &DataLossError{Topic: tp.topic, Partition: tp.partition, From: off, Available: -1,
				Why: "the topic or partition was deleted"}
		}
		s.log.Warn("Dropped a Kafka partition that is gone", "topic", tp.topic, "partition", tp.partition, "offset", off)
		dropped = true // the next offsets drop it
	}
	return spans, dropped, nil
}

// Read returns the records of the logged range: from req.Start (or the
// recorded starting offsets) up to req.End, per partition. Control records
// take offsets but yield no row.
func (s *Source) Read(ctx context.Context, req engine.ReadRequest) (engine.ReadResult, error) {
	return s.read(ctx, req, nil)
}

// ReadChunks reads what Read reads, handing the rows to emit a chunk of
// about readChunkRows at a time (engine.ChunkReader).
func (s *Source) ReadChunks(ctx context.Context, req engine.ReadRequest, emit func([]engine.Row) error) (engine.ReadResult, error) {
	return s.read(ctx, req, emit)
}

// read is Read, or ReadChunks when emit is not nil.
func (s *Source) read(ctx context.Context, req engine.ReadRequest, emit func([]engine.Row) error) (engine.ReadResult, error) {
	start, err := s.startOffsets(ctx, req.Start)
	if err != nil {
		return engine.ReadResult{}, err
	}
	end, err := parseOffsets(req.End)
	if err != nil {
		return engine.ReadResult{}, err
	}
	var spans []span
	for _, tp := range end.partitions() {
		to, _ := end.get(tp)
		from, known := start.get(tp)
		switch {
		case !known:
			from = 0
		case from > to:
			// Plan found the offset beyond the partition's end and
			// failOnDataLoss is false: read from the log start.
			lo, err := s.logStart(ctx, tp)
			if err != nil {
				return engine.ReadResult{}, err
			}
			s.log.Warn("Kafka partition restarted below the checkpoint's offset; reading from its start",
				"topic", tp.topic, "partition", tp.partition, "offset", from, "logStart", lo)
			from = min(lo, to)
		}
		if from < to {
			spans = append(spans, span{tp: tp, from: from, to: to})
		}
	}
	if len(spans) == 0 {
		return engine.ReadResult{Backlog: s.dataAge(req)}, nil
	}
	b := s.newBatch(req.Batch, spans, emit)
	if err := s.fetch(ctx, spans, b.add, b.flush); err != nil {
		return engine.ReadResult{}, err
	}
	if err := b.flush(); err != nil {
		return engine.ReadResult{}, err
	}
	if err := b.flushDeadLetters(ctx); err != nil {
		return engine.ReadResult{}, err
	}
	if s.newest == nil {
		s.newest = make(map[topicPartition]int64, len(spans))
	}
	for i, sp := range spans {
		s.newest[sp.tp] = max(s.newest[sp.tp], b.newest[i])
	}
	res := engine.ReadResult{Malformed: b.malformed, Backlog: s.dataAge(req)}
	if emit == nil {
		res.Rows = b.rows()
	}
	return res, nil
}

// dataAge completes the backlog Plan found for the batch req reads with
// Kafka's time lag: the age at the batch's timestamp of the newest record
// read from each partition up to the end. nil for a batch this process did
// not plan (a replay).
func (s *Source) dataAge(req engine.ReadRequest) *engine.Backlog {
	if req.Backlog == nil {
		return nil
	}
	b := *req.Backlog
	b.Partitions = slices.Clone(b.Partitions)
	for i, p := range b.Partitions {
		switch ts, read := s.newest[topicPartition{topic: p.Topic, partition: p.Partition}]; {
		case p.Lag == 0:
			p.LagMs = new(int64)
		case read && ts > 0:
			p.LagMs = new(max(0, req.Time.UnixMilli()-ts))
		}
		b.Partitions[i] = p
	}
	return &b
}

// Close stops the source's background reading and closes its client.
func (s *Source) Close() error {
	s.reader.pause()
	s.cl.Close()
	return nil
}

// startOffsets returns the offsets a batch starts from: raw, or for a source
// new to the checkpoint the recorded starting offsets (resolved and recorded
// on first use).
func (s *Source) startOffsets(ctx context.Context, raw engine.Offset) (offsets, error) {
	if len(raw) > 0 {
		return parseOffsets(raw)
	}
	if s.start == nil {
		if err := s.resolveStart(ctx); err != nil {
			return nil, err
		}
	}
	return s.start.Offsets.clone(), nil
}

// resolveStart turns startingOffsets into offsets and records them with the
// cluster id. A record left by a run that died first wins.
func (s *Source) resolveStart(ctx context.Context) error {
	latest, logStarts, err := s.list(ctx)
	if err != nil {
		return err
	}
	perPartition, err := s.spec.StartingPartitionOffsets()
	if err != nil {
		return fmt.Errorf("startingOffsets: %w", err)
	}
	offs := offsets{}
	for _, tp := range latest.partitions() {
		hi, _ := latest.get(tp)
		lo, _ := logStarts.get(tp)
		switch {
		case perPartition != nil:
			off, ok := perPartition[tp.topic][tp.partition]
			if !ok {
				return fmt.Errorf("startingOffsets names no offset for topic %s partition %d: list every partition of the source's topics (-2 earliest, -1 latest)", tp.topic, tp.partition)
			}
			switch off {
			case -2:
				off = lo
			case -1:
				off = hi
			}
			offs.set(tp, off)
		case s.spec.StartingOffsets == v1.OffsetsEarliest:
			offs.set(tp, lo)
		default:
			offs.set(tp, hi)
		}
	}
	for t, ps := range perPartition {
		for p := range ps {
			if _, ok := offs.get(topicPartition{t, p}); !ok {
				return fmt.Errorf("startingOffsets names topic %s partition %d, which the source does not read", t, p)
			}
		}
	}
	rec := startRecord{ClusterID: s.clusterID, StartingOffsets: s.spec.StartingOffsets, Offsets: offs}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := s.store.Create(ctx, StartKey, data); err != nil {
		if !errors.Is(err, checkpoint.ErrExists) {
			return fmt.Errorf("record starting offsets: %w", err)
		}
		return s.loadStart(ctx)
	}
	s.log.Info("Recorded Kafka starting offsets", "startingOffsets", s.spec.StartingOffsets, "offsets", string(offs.json()), "cluster", s.clusterID)
	s.start = &rec
	return nil
}

// list returns the last stable offset and the log start of every partition
// of the source's topics now.
func (s *Source) list(ctx context.Context) (latest, logStarts offsets, err error) {
	err = withRetry(ctx, s.opts.brokerTimeout, "list Kafka offsets", s.log, func(ctx context.Context) error {
		topics, err := s.topics(ctx)
		if err != nil || len(topics) == 0 {
			latest, logStarts = offsets{}, offsets{}
			return err
		}
		hi, err := s.adm.ListCommittedOffsets(ctx, topics...)
		if err != nil {
			return err
		}
		lo, err := s.adm.ListStartOffsets(ctx, topics...)
		if err != nil {
			return err
		}
		if latest, err = listed(hi); err != nil {
			return err
		}
		logStarts, err = listed(lo)
		return err
	})
	return latest, logStarts, err
}

// listed turns kadm's listing into offsets, leaving out topics that do not
// exist.
func listed(l kadm.ListedOffsets) (offsets, error) {
	o := offsets{}
	for t, ps := range l {
		for p, lo := range ps {
			switch {
			case p < 0 || errors.Is(lo.Err, kerr.UnknownTopicOrPartition):
				continue
			case lo.Err != nil:
				return nil, fmt.Errorf("list offsets of topic %s partition %d: %w", t, p, lo.Err)
			}
			o.set(topicPartition{t, p}, lo.Offset)
		}
	}
	return o, nil
}

// topics returns the topics the source reads now.
func (s *Source) topics(ctx context.Context) ([]string, error) {
	if s.pattern == nil {
		return s.spec.Topics, nil
	}
	all, err := s.adm.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	var topics []string
	for _, t := range all.Names() {
		if s.pattern.MatchString(t) {
			topics = append(topics, t)
		}
	}
	return topics, nil
}

func (s *Source) logStart(ctx context.Context, tp topicPartition) (int64, error) {
	var off int64 = -1
	err := withRetry(ctx, s.opts.brokerTimeout, "list Kafka log start", s.log, func(ctx context.Context) error {
		l, err := s.adm.ListStartOffsets(ctx, tp.topic)
		if err != nil {
			return err
		}
		if lo, ok := l.Lookup(tp.topic, tp.partition); ok && lo.Err == nil {
			off = lo.Offset
		}
		return nil
	})
	return off, err
}

// fetch hands the records of the spans to add, in offset order per
// partition, handling data loss and waiting out brokers that restart. It
// calls flush, which stops the fetch with an error, after every
// readChunkRows records or fewer (a wait for records).
func (s *Source) fetch(ctx context.Context, spans []span, add func(topicPartition, *fetched), flush func() error) error {
	s.reader.assign(spans)
	pending := make(map[topicPartition]span, len(spans))
	for _, sp := range spans {
		pending[sp.tp] = sp
	}
	for len(pending) > 0 {
		full, err := s.reader.take(ctx, pending, add, readChunkRows)
		var pe *partitionError
		switch {
		case errors.As(err, &pe):
			if err := s.lossAt(ctx, pe, pending); err != nil {
				return err
			}
		case err != nil:
			return err
		case len(pending) > 0 && !full:
			if err := s.checkStalled(ctx, pending); err != nil {
				return err
			}
		}
		if err := flush(); err != nil {
			return err
		}
	}
	return nil
}

// lossAt handles an error the consumer returned for a partition. Out of
// range below the log start is data loss; other errors stop the read.
func (s *Source) lossAt(ctx context.Context, pe *partitionError, pending map[topicPartition]span) error {
	tp, pos := pe.tp, pe.pos
	if !errors.Is(pe.err, kerr.OffsetOutOfRange) {
		return fmt.Errorf("read topic %s partition %d at offset %d: %w", tp.topic, tp.partition, pos, pe.err)
	}
	lo, err := s.logStart(ctx, tp)
	if err != nil {
		return err
	}
	if lo <= pos {
		return fmt.Errorf("read topic %s partition %d at offset %d (log start %d): %w", tp.topic, tp.partition, pos, lo, pe.err)
	}
	if s.failOnLoss {
		return &DataLossError{Topic: tp.topic, Partition: tp.partition, From: pos, Available: lo,
			Why: "retention or DeleteRecords removed them"}
	}
	sp := pending[tp]
	n := min(lo, sp.to) - pos
	s.lost.Add(n)
	s.log.Warn("Skipped Kafka records that are gone", "topic", tp.topic, "partition", tp.partition, "from", pos, "to", lo, "lost", n)
	s.reader.drop(tp)
	if lo >= sp.to {
		delete(pending, tp)
		return nil
	}
	sp.from = lo
	pending[tp] = sp
	s.reader.assign([]span{sp})
	return nil
}

// checkStalled asks the brokers about partitions whose records have not come
// for a while: records that vanished are data loss; otherwise the read goes
// on waiting (a broker may be restarting).
func (s *Source) checkStalled(ctx context.Context, pending map[topicPartition]span) error {
	latest, logStarts, err := s.list(ctx)
	if err != nil {
		return err
	}
	tps := make([]topicPartition, 0, len(pending))
	for tp := range pending {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, compareTP)
	for _, tp := range tps {
		sp := pending[tp]
		pos := s.reader.position(tp)
		hi, ok := latest.get(tp)
		lo, _ := logStarts.get(tp)
		var loss *DataLossError
		switch {
		case !ok:
			loss = &DataLossError{Topic: tp.topic, Partition: tp.partition, From: pos, Available: -1, Why: "the topic or partition was deleted"}
		case hi < sp.to && hi <= pos:
			loss = &DataLossError{Topic: tp.topic, Partition: tp.partition, From: pos, Available: hi, Why: "the partition was truncated"}
		case lo > pos:
			loss = &DataLossError{Topic: tp.topic, Partition: tp.partition, From: pos, Available: lo, Why: "retention or DeleteRecords removed them"}
		default:
			s.log.Warn("Waiting for Kafka records", "topic", tp.topic, "partition", tp.partition, "offset", pos, "until", sp.to)
			continue
		}
		if s.failOnLoss {
			return loss
		}
		s.lost.Add(sp.to - pos)
		s.log.Warn("Skipped Kafka records that are gone", "error", loss.Error())
		s.reader.drop(tp)
		delete(pending, tp)
	}
	return nil
}
