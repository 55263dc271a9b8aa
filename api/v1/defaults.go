package v1

// Defaults of the spec, mirrored by the kubebuilder default markers.
const (
	DefaultOutputMode                 = OutputAppend
	DefaultMinBatchesToRetain         = 100
	DefaultRetention                  = RetentionRetain
	DefaultStatePartitions            = 8
	DefaultOnMalformed                = MalformedFail
	DefaultStartingOffsets            = OffsetsLatest
	DefaultKafkaFormat                = KafkaJSON
	DefaultFilesSinkFormat            = FormatParquet
	DefaultRowsPerSecond              = 1
	DefaultNexmarkTable               = NexmarkBid
	DefaultNexmarkEventsPerSecond     = 10000
	DefaultNexmarkMaxEventsPerTrigger = 100000
	DefaultWebhookRowsPerRequest      = 1000
	DefaultWebhookTimeout             = Duration("30s")
)

// Default sets the defaults of the query's spec. It is what the API server's defaulting does
// from the CRD's markers, for callers that read a manifest without an API server.
func (q *StreamingQuery) Default() { q.Spec.Default() }

// Default fills every unset field that has a default. It never changes a set field, and
// applying it twice changes nothing.
func (s *StreamingQuerySpec) Default() {
	for i := range s.Sources {
		s.Sources[i].Default()
	}
	for i := range s.Transform {
		if j := s.Transform[i].Join; j != nil {
			setDefault(&j.Type, JoinInner)
		}
	}
	s.Sink.Default()
	setDefault(&s.OutputMode, DefaultOutputMode)
	setDefault(&s.Checkpoint.MinBatchesToRetain, DefaultMinBatchesToRetain)
	setDefault(&s.Checkpoint.Retention, DefaultRetention)
	setDefault(&s.StateStore.Partitions, DefaultStatePartitions)
}

// Default fills the source's unset fields that have a default.
func (s *Source) Default() {
	setDefault(&s.OnMalformed, DefaultOnMalformed)
	if k := s.Kafka; k != nil {
		setDefault(&k.StartingOffsets, DefaultStartingOffsets)
		setDefault(&k.FailOnDataLoss, ptr(true))
		setDefault(&k.Format, DefaultKafkaFormat)
		k.SASL.defaults()
		k.SchemaRegistry.defaults()
	}
	if d := s.Delta; d != nil {
		setDefault(&d.FailOnDataLoss, ptr(true))
	}
	if r := s.Rate; r != nil {
		setDefault(&r.RowsPerSecond, DefaultRowsPerSecond)
	}
	if n := s.Nexmark; n != nil {
		setDefault(&n.Table, DefaultNexmarkTable)
		setDefault(&n.EventsPerSecond, DefaultNexmarkEventsPerSecond)
		setDefault(&n.MaxEventsPerTrigger, DefaultNexmarkMaxEventsPerTrigger)
	}
}

// Default fills the sink's unset fields that have a default.
func (s *Sink) Default() {
	if f := s.Files; f != nil {
		setDefault(&f.Format, DefaultFilesSinkFormat)
	}
	if k := s.Kafka; k != nil {
		setDefault(&k.Format, DefaultKafkaFormat)
		k.SASL.defaults()
		k.SchemaRegistry.defaults()
	}
	if w := s.Webhook; w != nil {
		setDefault(&w.MaxRowsPerRequest, DefaultWebhookRowsPerRequest)
		setDefault(&w.Timeout, DefaultWebhookTimeout)
	}
}

func (r *SchemaRegistry) defaults() {
	if r == nil {
		return
	}
	setDefault(&r.UsernameEnv, DefaultSchemaRegistryUsernameEnv)
	setDefault(&r.PasswordEnv, DefaultSchemaRegistryPasswordEnv)
}

func (s *KafkaSASL) defaults() {
	if s == nil {
		return
	}
	setDefault(&s.UsernameEnv, DefaultKafkaUsernameEnv)
	setDefault(&s.PasswordEnv, DefaultKafkaPasswordEnv)
}

// Default fills the store's unset fields that have a default.
func (s *CheckpointStore) Default() {
	setDefault(&s.Spec.LocationTemplate, DefaultLocationTemplate)
}

func ptr[T any](v T) *T { return &v }

// setDefault sets *p to def when *p is unset (its type's zero value).
func setDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}
