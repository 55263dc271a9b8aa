package v1

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits on list lengths, mirrored by the CRD's maxItems.
const (
	MaxSources = 32
	MaxSteps   = 64
)

// Validate returns every problem of the query that its fields show by themselves: its name,
// then its spec (see [StreamingQuerySpec.Validate]). The name must be a DNS label because the
// controller derives the names of the query's objects and its checkpoint location from it.
// plan.Validate adds the problems that only following the columns shows.
func (q *StreamingQuery) Validate() field.ErrorList {
	var errs field.ErrorList
	name := field.NewPath("metadata", "name")
	if q.Name == "" {
		errs = append(errs, field.Required(name, "a query needs a name"))
	} else {
		errs = append(errs, dnsLabel(name, q.Name)...)
	}
	return append(errs, q.Spec.Validate()...)
}

// Validate returns every problem of the spec that needs no type inference, each with its
// field path under "spec", without any I/O. It accepts specs with and without defaults
// applied.
//
// It checks names (path segments, unique), one-of fields, required fields and value ranges,
// paths and URLs, durations, the order of the steps, and the combination of output mode,
// sink and stateful steps (see docs/spec.md). What needs the columns flowing into each step
// (that a named column exists and has the right type, that the sources agree on their
// columns, that every CEL expression compiles and type-checks, the event-time column) is
// checked by plan.ValidateSpec, which returns these problems too.
func (s *StreamingQuerySpec) Validate() field.ErrorList {
	spec := field.NewPath("spec")
	errs := s.validateSources(spec.Child("sources"))
	errs = append(errs, s.validateTransform(spec.Child("transform"))...)
	errs = append(errs, s.validateSink(spec.Child("sink"))...)
	errs = append(errs, s.validateOutputMode(spec.Child("outputMode"))...)
	errs = append(errs, s.Trigger.validate(spec.Child("trigger"))...)
	errs = append(errs, s.validateBounded(spec.Child("sources"))...)
	errs = append(errs, s.Checkpoint.validate(spec.Child("checkpoint"))...)
	errs = append(errs, s.StateStore.validate(spec.Child("stateStore"))...)
	errs = append(errs, s.Resources.validate(spec.Child("resources"))...)
	errs = append(errs, s.Engine.validate(spec.Child("engine"))...)
	errs = append(errs, s.Runtime.validate(spec.Child("runtime"))...)
	return errs
}

func (s *Source) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), "a source needs a stable name"))
	} else {
		errs = append(errs, segmentName(p.Child("name"), s.Name)...)
	}
	errs = append(errs, exactlyOne(p, s.Kinds(), "kafka, files, delta, rate, nexmark")...)
	if s.Kafka != nil {
		errs = append(errs, s.Kafka.validate(p.Child("kafka"))...)
	}
	if s.Files != nil {
		errs = append(errs, s.Files.validate(p.Child("files"))...)
	}
	if s.Delta != nil {
		errs = append(errs, s.Delta.validate(p.Child("delta"))...)
	}
	if s.Rate != nil && s.Rate.RowsPerSecond < 0 {
		errs = append(errs, field.Invalid(p.Child("rate", "rowsPerSecond"), s.Rate.RowsPerSecond, "must be at least 1"))
	}
	if s.Nexmark != nil {
		errs = append(errs, s.Nexmark.validate(p.Child("nexmark"))...)
	}
	errs = append(errs, s.validateSchema(p.Child("schema"))...)
	switch s.OnMalformed {
	case "", MalformedFail, MalformedSkip:
		if s.DeadLetterPath != "" {
			errs = append(errs, field.Forbidden(p.Child("deadLetterPath"), "may only be set when onMalformed is deadLetter"))
		}
	case MalformedDeadLetter:
		errs = append(errs, location(p.Child("deadLetterPath"), s.DeadLetterPath, true)...)
	default:
		errs = append(errs, field.NotSupported(p.Child("onMalformed"), s.OnMalformed, []MalformedPolicy{MalformedFail, MalformedSkip, MalformedDeadLetter}))
	}
	if s.Delta != nil && (s.OnMalformed == MalformedSkip || s.OnMalformed == MalformedDeadLetter) {
		errs = append(errs, field.Forbidden(p.Child("onMalformed"), deltaOnMalformed))
	}
	return errs
}

// deltaOnMalformed says why a delta source takes only onMalformed: fail; the CRD's rule on
// Source says the same.
const deltaOnMalformed = "a delta source has no malformed records to skip: it reads the Parquet files that the table's " +
	"writers wrote to its schema, and a file it cannot read stops the query. Leave onMalformed unset (fail); " +
	"drop unwanted rows with a filter step"

func (s *Source) validateSchema(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case s.Rate != nil:
		if s.Schema != nil {
			errs = append(errs, field.Forbidden(p, "a rate source takes no schema: it yields timestamp (timestamp) and value (long)"))
		}
		return errs
	case s.Nexmark != nil:
		if s.Schema != nil {
			errs = append(errs, field.Forbidden(p, "a nexmark source takes no schema: its table fixes its columns"))
		}
		return errs
	case s.Kafka != nil && s.Kafka.Format == KafkaRaw:
		if s.Schema != nil {
			errs = append(errs, field.Forbidden(p, "a Kafka source with format raw takes no schema: it yields value (string)"))
		}
		return errs
	case s.Schema == nil:
		if s.Kind() != "" {
			errs = append(errs, field.Required(p, "the columns of the source's records must be declared"))
		}
		return errs
	}
	cols := p.Child("columns")
	errs = append(errs, validateColumns(cols, s.Schema.Columns)...)
	if s.Kafka != nil {
		for i, c := range s.Schema.Columns {
			if strings.HasPrefix(c.Name, "_") && slices.Contains(KafkaMetadataColumns().Names(), c.Name) {
				errs = append(errs, field.Invalid(cols.Index(i).Child("name"), c.Name, "is a Kafka metadata column that the source adds itself"))
			}
		}
	}
	return errs
}

func (k *KafkaSource) validate(p *field.Path) field.ErrorList {
	errs := bootstrapServers(p.Child("bootstrapServers"), k.BootstrapServers)
	switch {
	case len(k.Topics) == 0 && k.TopicPattern == "":
		errs = append(errs, field.Required(p.Child("topics"), "one of topics, topicPattern is required"))
	case len(k.Topics) > 0 && k.TopicPattern != "":
		errs = append(errs, field.Forbidden(p.Child("topicPattern"), "topics and topicPattern are exclusive"))
	}
	seen := map[string]bool{}
	for i, t := range k.Topics {
		errs = append(errs, topicName(p.Child("topics").Index(i), t)...)
		if seen[t] {
			errs = append(errs, field.Duplicate(p.Child("topics").Index(i), t))
		}
		seen[t] = true
	}
	if k.TopicPattern != "" {
		if _, err := regexp.Compile(k.TopicPattern); err != nil {
			errs = append(errs, field.Invalid(p.Child("topicPattern"), k.TopicPattern, err.Error()))
		}
	}
	errs = append(errs, k.validateStartingOffsets(p.Child("startingOffsets"))...)
	if k.MaxOffsetsPerTrigger != nil && *k.MaxOffsetsPerTrigger < 1 {
		errs = append(errs, field.Invalid(p.Child("maxOffsetsPerTrigger"), *k.MaxOffsetsPerTrigger, "must be at least 1"))
	}
	errs = append(errs, supported(p.Child("format"), k.Format, KafkaJSON, KafkaCSV, KafkaRaw, KafkaAvro, KafkaProtobuf, KafkaJSONSchema)...)
	errs = append(errs, validateKeyFormat(p.Child("keyFormat"), k.KeyFormat)...)
	errs = append(errs, validateSchemaRegistry(p, k.Format, k.KeyFormat, k.SchemaRegistry)...)
	if r := k.SchemaRegistry; r != nil && r.Version != nil {
		errs = append(errs, field.Forbidden(p.Child("schemaRegistry", "version"), "a source reads each record by the schema id it carries; version pins a sink's schema"))
	}
	errs = append(errs, k.SASL.validate(p.Child("sasl"))...)
	errs = append(errs, k.TLS.validate(p.Child("tls"))...)
	return errs
}

// StartingPartitionOffsets parses the per-partition JSON form of startingOffsets,
// {"topic":{"0":12}}, into topic → partition → offset (-2 earliest, -1 latest). It returns
// nil and no error for earliest, latest and the empty string.
func (k *KafkaSource) StartingPartitionOffsets() (map[string]map[int32]int64, error) {
	switch k.StartingOffsets {
	case "", OffsetsEarliest, OffsetsLatest:
		return nil, nil
	}
	var raw map[string]map[string]int64
	if err := json.Unmarshal([]byte(k.StartingOffsets), &raw); err != nil {
		return nil, fmt.Errorf(`want earliest, latest or JSON such as {"topic":{"0":12}}: %w`, err)
	}
	out := make(map[string]map[int32]int64, len(raw))
	for topic, parts := range raw {
		out[topic] = make(map[int32]int64, len(parts))
		for ps, off := range parts {
			part, err := strconv.ParseInt(ps, 10, 32)
			if err != nil || part < 0 {
				return nil, fmt.Errorf("topic %s: partition %q is not a partition number", topic, ps)
			}
			if off < -2 {
				return nil, fmt.Errorf("topic %s partition %d: offset %d: want an offset, -2 (earliest) or -1 (latest)", topic, part, off)
			}
			out[topic][int32(part)] = off
		}
	}
	return out, nil
}

func (k *KafkaSource) validateStartingOffsets(p *field.Path) field.ErrorList {
	offsets, err := k.StartingPartitionOffsets()
	if err != nil {
		return field.ErrorList{field.Invalid(p, k.StartingOffsets, err.Error())}
	}
	var errs field.ErrorList
	if len(k.Topics) > 0 {
		for _, topic := range slices.Sorted(maps.Keys(offsets)) {
			if !slices.Contains(k.Topics, topic) {
				errs = append(errs, field.Invalid(p, k.StartingOffsets, fmt.Sprintf("topic %q is not among the source's topics", topic)))
			}
		}
	}
	return errs
}

// validateKeyFormat checks a Kafka source's or sink's keyFormat.
func validateKeyFormat(p *field.Path, f KafkaFormat) field.ErrorList {
	return supported(p, f, KafkaKeyString, KafkaJSON, KafkaAvro, KafkaProtobuf)
}

// validateSchemaRegistry checks that a Kafka source's or sink's schemaRegistry is set exactly
// when its value or key format needs one (avro, protobuf).
func validateSchemaRegistry(p *field.Path, format, keyFormat KafkaFormat, r *SchemaRegistry) field.ErrorList {
	rp := p.Child("schemaRegistry")
	switch {
	case format.UsesSchemaRegistry() && r == nil:
		return field.ErrorList{field.Required(rp, fmt.Sprintf("format %s reads schemas from a Schema Registry: set schemaRegistry.url", format))}
	case keyFormat.UsesSchemaRegistry() && r == nil:
		return field.ErrorList{field.Required(rp, fmt.Sprintf("keyFormat %s reads schemas from a Schema Registry: set schemaRegistry.url", keyFormat))}
	case !format.UsesSchemaRegistry() && !keyFormat.UsesSchemaRegistry() && r != nil:
		return field.ErrorList{field.Forbidden(rp, fmt.Sprintf("format %s uses no Schema Registry, nor does the key", format))}
	case r == nil:
		return nil
	}
	if r.Version != nil && *r.Version < 1 {
		return field.ErrorList{field.Invalid(rp.Child("version"), *r.Version, "versions start at 1")}
	}
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return field.ErrorList{field.Invalid(rp.Child("url"), r.URL, "want an http or https URL")}
	}
	return nil
}

func (s *KafkaSASL) validate(p *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	errs = append(errs, requiredOneOf(p.Child("mechanism"), s.Mechanism, "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", SASLPlain, SASLScramSHA256, SASLScramSHA512)...)
	if s.SecretName != "" {
		errs = append(errs, dnsSubdomain(p.Child("secretName"), s.SecretName)...)
	}
	for _, v := range []struct{ name, value string }{{"usernameEnv", s.UsernameEnv}, {"passwordEnv", s.PasswordEnv}} {
		if v.value != "" && !envName.MatchString(v.value) {
			errs = append(errs, field.Invalid(p.Child(v.name), v.value, "must be an environment variable name"))
		}
	}
	return errs
}

func (t *KafkaTLS) validate(p *field.Path) field.ErrorList {
	if t == nil {
		return nil
	}
	var errs field.ErrorList
	if (t.CertFile == "") != (t.KeyFile == "") {
		errs = append(errs, field.Invalid(p, t.CertFile+","+t.KeyFile, "certFile and keyFile go together"))
	}
	for _, v := range []struct{ name, value string }{{"caSecretName", t.CASecretName}, {"clientSecretName", t.ClientSecretName}} {
		if v.value != "" {
			errs = append(errs, dnsSubdomain(p.Child(v.name), v.value)...)
		}
	}
	return errs
}

// supported checks that v, at p, is one of allowed. An empty v passes: a default applies, or
// the caller requires it (requiredOneOf).
func supported[T ~string](p *field.Path, v T, allowed ...T) field.ErrorList {
	if v == "" || slices.Contains(allowed, v) {
		return nil
	}
	return field.ErrorList{field.NotSupported(p, v, allowed)}
}

// requiredOneOf checks that v, at p, is set (required says to what) and one of allowed.
func requiredOneOf[T ~string](p *field.Path, v T, required string, allowed ...T) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(p, required)}
	}
	return supported(p, v, allowed...)
}

func (fs *FilesSource) validate(p *field.Path) field.ErrorList {
	errs := location(p.Child("path"), fs.Path, true)
	errs = append(errs, fs.S3.validate(p.Child("s3"), fs.Path)...)
	errs = append(errs, requiredOneOf(p.Child("format"), fs.Format, "json, csv or parquet", FormatJSON, FormatCSV, FormatParquet)...)
	if fs.MaxFilesPerTrigger != nil && *fs.MaxFilesPerTrigger < 1 {
		errs = append(errs, field.Invalid(p.Child("maxFilesPerTrigger"), *fs.MaxFilesPerTrigger, "must be at least 1"))
	}
	return errs
}

func (d *DeltaSource) validate(p *field.Path) field.ErrorList {
	errs := location(p.Child("path"), d.Path, true)
	errs = append(errs, d.S3.validate(p.Child("s3"), d.Path)...)
	if d.MaxFilesPerTrigger != nil && *d.MaxFilesPerTrigger < 1 {
		errs = append(errs, field.Invalid(p.Child("maxFilesPerTrigger"), *d.MaxFilesPerTrigger, "must be at least 1"))
	}
	if d.StartingVersion != nil && *d.StartingVersion < 0 {
		errs = append(errs, field.Invalid(p.Child("startingVersion"), *d.StartingVersion, "must be at least 0"))
	}
	return errs
}

// validateSink checks the sink's settings; that the columns it names reach it is the plan's
// to check.
func (s *StreamingQuerySpec) validateSink(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	k := &s.Sink
	errs = append(errs, exactlyOne(p, k.Kinds(), "delta, files, kafka, postgres, webhook, console")...)
	if d := k.Delta; d != nil {
		dp := p.Child("delta")
		errs = append(errs, location(dp.Child("path"), d.Path, true)...)
		errs = append(errs, d.S3.validate(dp.Child("s3"), d.Path)...)
		errs = append(errs, columnRefs(dp.Child("partitionColumns"), d.PartitionColumns)...)
		errs = append(errs, columnRefs(dp.Child("mergeKeys"), d.MergeKeys)...)
	}
	if pg := k.Postgres; pg != nil {
		errs = append(errs, pg.validate(p.Child("postgres"))...)
	}
	if fs := k.Files; fs != nil {
		fp := p.Child("files")
		errs = append(errs, location(fp.Child("path"), fs.Path, true)...)
		errs = append(errs, fs.S3.validate(fp.Child("s3"), fs.Path)...)
		errs = append(errs, supported(fp.Child("format"), fs.Format, FormatParquet, FormatJSON)...)
	}
	if ks := k.Kafka; ks != nil {
		kp := p.Child("kafka")
		errs = append(errs, bootstrapServers(kp.Child("bootstrapServers"), ks.BootstrapServers)...)
		if ks.Topic == "" {
			errs = append(errs, field.Required(kp.Child("topic"), "the topic that receives the records"))
		} else {
			errs = append(errs, topicName(kp.Child("topic"), ks.Topic)...)
		}
		errs = append(errs, supported(kp.Child("format"), ks.Format, KafkaJSON, KafkaAvro, KafkaProtobuf, KafkaJSONSchema)...)
		errs = append(errs, validateKeyFormat(kp.Child("keyFormat"), ks.KeyFormat)...)
		if ks.KeyFormat != "" && ks.KeyFormat != KafkaKeyString && ks.KeyColumn == "" {
			errs = append(errs, field.Required(kp.Child("keyColumn"), fmt.Sprintf("keyFormat %s formats the key column: name it", ks.KeyFormat)))
		}
		errs = append(errs, validateSchemaRegistry(kp, ks.Format, ks.KeyFormat, ks.SchemaRegistry)...)
		errs = append(errs, ks.SASL.validate(kp.Child("sasl"))...)
		errs = append(errs, ks.TLS.validate(kp.Child("tls"))...)
	}
	if w := k.Webhook; w != nil {
		wp := p.Child("webhook")
		if w.URL == "" {
			errs = append(errs, field.Required(wp.Child("url"), "an http or https URL"))
		} else if u, err := url.Parse(w.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, field.Invalid(wp.Child("url"), w.URL, "must be an http or https URL with a host"))
		}
		for _, name := range slices.Sorted(maps.Keys(w.Headers)) {
			if !headerName.MatchString(name) {
				errs = append(errs, field.Invalid(wp.Child("headers").Key(name), name, "must be an HTTP header name"))
			}
		}
		if w.HeadersSecretName != "" {
			errs = append(errs, dnsSubdomain(wp.Child("headersSecretName"), w.HeadersSecretName)...)
		}
		if w.MaxRowsPerRequest < 0 {
			errs = append(errs, field.Invalid(wp.Child("maxRowsPerRequest"), w.MaxRowsPerRequest, "must be at least 1"))
		}
		errs = append(errs, duration(wp.Child("timeout"), w.Timeout, false)...)
	}
	return errs
}

// validateOutputMode checks the output mode against the sink and the steps; the plan checks
// what depends on the event time flowing through them (append after an aggregate, chained
// aggregates) and that an upsert's keys reach the sink.
func (s *StreamingQuerySpec) validateOutputMode(p *field.Path) field.ErrorList {
	mode := s.OutputMode
	if mode == "" {
		mode = OutputAppend
	}
	if !slices.Contains(OutputModes(), mode) {
		return field.ErrorList{field.NotSupported(p, s.OutputMode, OutputModes())}
	}
	var errs field.ErrorList
	if k := s.Sink.Kind(); k != "" && !slices.Contains(k.OutputModes(), mode) {
		e := field.NotSupported(p, mode, k.OutputModes())
		e.Detail = fmt.Sprintf("the %s sink supports %s", k, e.Detail)
		errs = append(errs, e)
	}
	if mode == OutputUpdate {
		errs = append(errs, s.validateUpsertKeys()...)
	}
	aggregate, streamJoin := -1, -1
	for i := range s.Transform {
		st := &s.Transform[i]
		if st.Join != nil && st.Join.Stream != nil && streamJoin < 0 {
			streamJoin = i
		}
		if st.Aggregate != nil && aggregate < 0 {
			aggregate = i
		}
	}
	if streamJoin >= 0 && mode != OutputAppend {
		errs = append(errs, field.Invalid(p, mode, fmt.Sprintf("a stream join (transform[%d]) emits each joined row once, when it is found or when the watermark passes its time bound: it needs append mode", streamJoin)))
	}
	for i := range s.Transform {
		a := s.Transform[i].Aggregate
		if a == nil || a.Session() == nil {
			continue
		}
		switch {
		case mode == OutputComplete:
			errs = append(errs, field.Invalid(p, mode, fmt.Sprintf("transform[%d] aggregates by session: a session is written when it changes (update) or once, when the watermark closes it (append); complete mode would keep every session forever", i)))
		case mode == OutputUpdate && s.Sink.Kind().Upserts():
			errs = append(errs, field.Invalid(p, mode, fmt.Sprintf("transform[%d] aggregates by session and the %s sink upserts by key: when sessions merge, the merged-away session's row (another window_start) would stay in the table; use append mode, which writes each session once, when it closes", i, s.Sink.Kind())))
		}
	}
	if mode == OutputComplete && aggregate < 0 {
		errs = append(errs, field.Invalid(p, mode, "complete mode writes the whole result of an aggregation every batch: it needs an aggregate step; use append or update"))
	}
	return errs
}

func (n *NexmarkSource) validate(p *field.Path) field.ErrorList {
	errs := supported(p.Child("table"), n.Table, NexmarkBid, NexmarkAuction, NexmarkPerson)
	if n.EventsPerSecond < 0 {
		errs = append(errs, field.Invalid(p.Child("eventsPerSecond"), n.EventsPerSecond, "must be at least 1"))
	}
	if n.MaxEventsPerTrigger < 0 {
		errs = append(errs, field.Invalid(p.Child("maxEventsPerTrigger"), n.MaxEventsPerTrigger, "must be at least 1"))
	}
	if n.NumEvents != nil && *n.NumEvents < 1 {
		errs = append(errs, field.Invalid(p.Child("numEvents"), *n.NumEvents, "must be at least 1; omit it for an unbounded stream"))
	}
	if n.StartTime != "" {
		if _, err := time.Parse(time.RFC3339, n.StartTime); err != nil {
			errs = append(errs, field.Invalid(p.Child("startTime"), n.StartTime, "want an RFC 3339 timestamp such as 2026-01-05T10:00:00Z"))
		}
	}
	return errs
}

// validateBounded refuses a trigger that runs until the sources are drained (availableNow,
// once) with a nexmark source that never is: one generating as fast as possible without
// numEvents.
func (s *StreamingQuerySpec) validateBounded(p *field.Path) field.ErrorList {
	if !s.Trigger.AvailableNow && !s.Trigger.Once {
		return nil
	}
	var errs field.ErrorList
	for i, src := range s.Sources {
		if n := src.Nexmark; n != nil && n.AsFastAsPossible && n.NumEvents == nil {
			errs = append(errs, field.Required(p.Index(i).Child("nexmark", "numEvents"),
				"an availableNow or once trigger runs until the sources have nothing new, which a nexmark source generating as fast as possible never reaches: set numEvents, or use another trigger"))
		}
	}
	return errs
}

func (t *Trigger) validate(p *field.Path) field.ErrorList {
	var set []string
	if t.ProcessingTime != "" {
		set = append(set, "processingTime")
	}
	if t.AvailableNow {
		set = append(set, "availableNow")
	}
	if t.Once {
		set = append(set, "once")
	}
	var errs field.ErrorList
	if len(set) > 1 {
		errs = append(errs, field.Invalid(p, strings.Join(set, ", "), "at most one of processingTime, availableNow, once may be set"))
	}
	return append(errs, duration(p.Child("processingTime"), t.ProcessingTime, false)...)
}

func (c *Checkpoint) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Location != "" {
		errs = append(errs, location(p.Child("location"), c.Location, false)...)
	}
	if c.Store != "" {
		errs = append(errs, dnsSubdomain(p.Child("store"), c.Store)...)
	}
	if c.MinBatchesToRetain < 0 {
		errs = append(errs, field.Invalid(p.Child("minBatchesToRetain"), c.MinBatchesToRetain, "must be at least 1"))
	}
	errs = append(errs, supported(p.Child("retention"), c.Retention, RetentionRetain, RetentionDelete)...)
	return errs
}

// MaxStatePartitions is the largest StateStore.Partitions.
const MaxStatePartitions = 1024

func (s *StateStore) validate(p *field.Path) field.ErrorList {
	if s.Partitions < 0 || s.Partitions > MaxStatePartitions {
		return field.ErrorList{field.Invalid(p.Child("partitions"), s.Partitions, fmt.Sprintf("must be between 1 and %d", MaxStatePartitions))}
	}
	return nil
}

func (r *ResourceRequirements) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(r.Requests)) {
		req := r.Requests[name]
		if req.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child("requests").Key(name), req.String(), "must not be negative"))
		}
		if lim, ok := r.Limits[name]; ok && req.Cmp(lim) > 0 {
			errs = append(errs, field.Invalid(p.Child("requests").Key(name), req.String(), "must not exceed the limit "+lim.String()))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.Limits)) {
		if lim := r.Limits[name]; lim.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child("limits").Key(name), lim.String(), "must not be negative"))
		}
	}
	return errs
}

// exactlyOne checks that set, the kinds set at p, holds exactly one of all (their names,
// comma-separated).
func exactlyOne[T ~string](p *field.Path, set []T, all string) field.ErrorList {
	detail := "exactly one of " + all + " must be set"
	switch len(set) {
	case 0:
		return field.ErrorList{field.Required(p, detail)}
	case 1:
		return nil
	}
	return field.ErrorList{field.Invalid(p, kindList(set), detail)}
}

func kindList[T ~string](kinds []T) string {
	s := make([]string, len(kinds))
	for i, k := range kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

var (
	identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	kafkaTopic = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)
	envName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	s3Bucket   = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
)

// celReserved are CEL's reserved words, which cannot name a variable.
var celReserved = []string{
	"as", "break", "const", "continue", "else", "false", "for", "function", "if", "import", "in",
	"let", "loop", "namespace", "null", "package", "return", "true", "var", "void", "while",
}

// ValidColumnName reports whether name may name a column: letters, digits and underscores,
// not starting with a digit, and not a reserved word of CEL.
func ValidColumnName(name string) bool { return columnName(nil, name) == nil }

func columnName(p *field.Path, name string) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Required(p, "a column needs a name")}
	case !identifier.MatchString(name):
		return field.ErrorList{field.Invalid(p, name, "a column name is letters, digits and underscores, not starting with a digit")}
	case slices.Contains(celReserved, name):
		return field.ErrorList{field.Invalid(p, name, "is a reserved word of CEL and cannot name a column")}
	}
	return nil
}

func dnsLabel(p *field.Path, name string) field.ErrorList {
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(p, name, strings.Join(msgs, "; "))}
	}
	return nil
}

// segmentName checks the name of a source or a stateful step, which the checkpoint uses as
// one path segment (offsets and state are keyed by it): a DNS label that may also hold '_',
// as Spark and Terraform users write names (orders_eu, per_country).
func segmentName(p *field.Path, name string) field.ErrorList {
	if len(name) > validation.DNS1123LabelMaxLength || !segmentNamePattern.MatchString(name) {
		return field.ErrorList{field.Invalid(p, name,
			"must be at most 63 lower-case letters, digits, '-' and '_', starting and ending with a letter or digit, so that it is one path segment")}
	}
	return nil
}

// segmentNamePattern is the pattern of segmentName; the CRD carries the same one.
var segmentNamePattern = regexp.MustCompile(`^[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)

func dnsSubdomain(p *field.Path, name string) field.ErrorList {
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(p, name, strings.Join(msgs, "; "))}
	}
	return nil
}

func topicName(p *field.Path, t string) field.ErrorList {
	if !kafkaTopic.MatchString(t) || t == "." || t == ".." {
		return field.ErrorList{field.Invalid(p, t, "a Kafka topic name is 1 to 249 of letters, digits, '.', '_' and '-'")}
	}
	return nil
}

func bootstrapServers(p *field.Path, servers []string) field.ErrorList {
	if len(servers) == 0 {
		return field.ErrorList{field.Required(p, "at least one host:port of a broker")}
	}
	var errs field.ErrorList
	for i, s := range servers {
		host, port, err := net.SplitHostPort(s)
		if err == nil {
			_, err = strconv.ParseUint(port, 10, 16)
		}
		if err != nil || host == "" {
			errs = append(errs, field.Invalid(p.Index(i), s, "must be host:port"))
		}
	}
	return errs
}

// location checks a checkpoint, source or sink location: a local path, a file:// URL or an
// s3://bucket/prefix.
func location(p *field.Path, loc string, required bool) field.ErrorList {
	if loc == "" {
		if required {
			return field.ErrorList{field.Required(p, "a local path, file:// URL or s3://bucket/prefix")}
		}
		return nil
	}
	scheme, rest, ok := strings.Cut(loc, "://")
	if !ok {
		return nil
	}
	switch scheme {
	case "file":
		if rest == "" || rest[0] != '/' {
			return field.ErrorList{field.Invalid(p, loc, "a file:// URL needs an absolute path, as in file:///data/out")}
		}
	case "s3":
		bucket, _, _ := strings.Cut(rest, "/")
		if !s3Bucket.MatchString(bucket) {
			return field.ErrorList{field.Invalid(p, loc, "an S3 location is s3://bucket/prefix with a valid bucket name")}
		}
	default:
		return field.ErrorList{field.Invalid(p, loc, fmt.Sprintf("scheme %q is not supported: use a local path, file:// or s3://", scheme))}
	}
	return nil
}

// validate checks the S3 settings of the location path; c may be nil.
func (c *S3Connection) validate(p *field.Path, path string) field.ErrorList {
	if c == nil {
		return nil
	}
	var errs field.ErrorList
	if !strings.HasPrefix(path, "s3://") {
		errs = append(errs, field.Invalid(p, "", "s3 settings apply to an s3:// path only; remove them or use an s3:// path"))
	}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.User != nil {
			errs = append(errs, field.Invalid(p.Child("endpoint"), c.Endpoint, "must be http://host:port or https://host:port, or empty for AWS S3"))
		}
	}
	if c.SecretName != "" {
		errs = append(errs, dnsSubdomain(p.Child("secretName"), c.SecretName)...)
	}
	if c.CredentialsEnvPrefix != "" && !envPrefix.MatchString(c.CredentialsEnvPrefix) {
		errs = append(errs, field.Invalid(p.Child("credentialsEnvPrefix"), c.CredentialsEnvPrefix, "must be upper-case letters, digits and _, starting with a letter, as in LAKE_"))
	}
	return errs
}

var envPrefix = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// duration checks a duration field; positive requires it to be greater than zero.
func duration(p *field.Path, d Duration, positive bool) field.ErrorList {
	v, err := d.Parse()
	if err != nil {
		return field.ErrorList{field.Invalid(p, string(d), err.Error())}
	}
	if positive && v <= 0 {
		return field.ErrorList{field.Invalid(p, string(d), "must be greater than zero")}
	}
	return nil
}
