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
		if j := s.Transform[i].Join; j != nil && j.Type == "" {
			j.Type = JoinInner
		}
	}
	s.Sink.Default()
	if s.OutputMode == "" {
		s.OutputMode = DefaultOutputMode
	}
	if s.Checkpoint.MinBatchesToRetain == 0 {
		s.Checkpoint.MinBatchesToRetain = DefaultMinBatchesToRetain
	}
	if s.Checkpoint.Retention == "" {
		s.Checkpoint.Retention = DefaultRetention
	}
	if s.StateStore.Partitions == 0 {
		s.StateStore.Partitions = DefaultStatePartitions
	}
}

// Default fills the source's unset fields that have a default.
func (s *Source) Default() {
	if s.OnMalformed == "" {
		s.OnMalformed = DefaultOnMalformed
	}
	if k := s.Kafka; k != nil {
		if k.StartingOffsets == "" {
			k.StartingOffsets = DefaultStartingOffsets
		}
		if k.FailOnDataLoss == nil {
			k.FailOnDataLoss = ptr(true)
		}
		if k.Format == "" {
			k.Format = DefaultKafkaFormat
		}
		k.SASL.defaults()
		k.SchemaRegistry.defaults()
	}
	if d := s.Delta; d != nil && d.FailOnDataLoss == nil {
		d.FailOnDataLoss = ptr(true)
	}
	if r := s.Rate; r != nil && r.RowsPerSecond == 0 {
		r.RowsPerSecond = DefaultRowsPerSecond
	}
	if n := s.Nexmark; n != nil {
		if n.Table == "" {
			n.Table = DefaultNexmarkTable
		}
		if n.EventsPerSecond == 0 {
			n.EventsPerSecond = DefaultNexmarkEventsPerSecond
		}
		if n.MaxEventsPerTrigger == 0 {
			n.MaxEventsPerTrigger = DefaultNexmarkMaxEventsPerTrigger
		}
	}
}

// Default fills the sink's unset fields that have a default.
func (s *Sink) Default() {
	if f := s.Files; f != nil && f.Format == "" {
		f.Format = DefaultFilesSinkFormat
	}
	if k := s.Kafka; k != nil {
		if k.Format == "" {
			k.Format = DefaultKafkaFormat
		}
		k.SASL.defaults()
		k.SchemaRegistry.defaults()
	}
	if w := s.Webhook; w != nil {
		if w.MaxRowsPerRequest == 0 {
			w.MaxRowsPerRequest = DefaultWebhookRowsPerRequest
		}
		if w.Timeout == "" {
			w.Timeout = DefaultWebhookTimeout
		}
	}
}

func (r *SchemaRegistry) defaults() {
	if r == nil {
		return
	}
	if r.UsernameEnv == "" {
		r.UsernameEnv = DefaultSchemaRegistryUsernameEnv
	}
	if r.PasswordEnv == "" {
		r.PasswordEnv = DefaultSchemaRegistryPasswordEnv
	}
}

func (s *KafkaSASL) defaults() {
	if s == nil {
		return
	}
	if s.UsernameEnv == "" {
		s.UsernameEnv = DefaultKafkaUsernameEnv
	}
	if s.PasswordEnv == "" {
		s.PasswordEnv = DefaultKafkaPasswordEnv
	}
}

// Default fills the store's unset fields that have a default.
func (s *CheckpointStore) Default() {
	if s.Spec.LocationTemplate == "" {
		s.Spec.LocationTemplate = DefaultLocationTemplate
	}
}

func ptr[T any](v T) *T { return &v }
