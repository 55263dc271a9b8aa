package v1

import (
	"maps"
	"slices"
)

// Feature is a part of the spec that is typed in this package but may not be implemented by
// the engine yet. Validate refuses a spec that uses a feature outside the [Features] it is
// given, with a "not supported yet" error on the field.
type Feature string

// Features of the spec. Everything not listed here (triggers, checkpoint, onMalformed,
// append mode, …) is always supported.
const (
	FeatureKafkaSource   Feature = "source.kafka"
	FeatureFilesSource   Feature = "source.files"
	FeatureDeltaSource   Feature = "source.delta"
	FeatureRateSource    Feature = "source.rate"
	FeatureNexmarkSource Feature = "source.nexmark"

	FeatureFilter         Feature = "step.filter"
	FeatureSelect         Feature = "step.select"
	FeatureWatermark      Feature = "step.watermark"
	FeatureAggregate      Feature = "step.aggregate"
	FeatureDropDuplicates Feature = "step.dropDuplicates"
	FeatureStaticJoin     Feature = "step.join.static"
	FeatureStreamJoin     Feature = "step.join.stream"

	FeatureDeltaSink    Feature = "sink.delta"
	FeatureFilesSink    Feature = "sink.files"
	FeatureKafkaSink    Feature = "sink.kafka"
	FeaturePostgresSink Feature = "sink.postgres"
	FeatureWebhookSink  Feature = "sink.webhook"
	FeatureConsoleSink  Feature = "sink.console"

	FeatureUpdateMode   Feature = "outputMode.update"
	FeatureCompleteMode Feature = "outputMode.complete"
)

// Supported returns the features the engine implements today.
//
// This is the one switch: the change that implements a feature adds it to this list (and
// docs/spec.md's table). Tests of a feature not switched on yet validate with
// Supported().With(…) or AllFeatures().
func Supported() Features {
	return NewFeatures(
		FeatureKafkaSource, FeatureFilesSource, FeatureDeltaSource, FeatureRateSource, FeatureNexmarkSource,
		FeatureFilter, FeatureSelect, FeatureWatermark, FeatureAggregate, FeatureDropDuplicates,
		FeatureStaticJoin, FeatureStreamJoin,
		FeatureDeltaSink, FeatureFilesSink, FeatureKafkaSink, FeaturePostgresSink, FeatureWebhookSink, FeatureConsoleSink,
		FeatureUpdateMode, FeatureCompleteMode,
	)
}

// AllFeatures returns every feature of the spec.
func AllFeatures() Features {
	return NewFeatures(
		FeatureKafkaSource, FeatureFilesSource, FeatureDeltaSource, FeatureRateSource, FeatureNexmarkSource,
		FeatureFilter, FeatureSelect, FeatureWatermark, FeatureAggregate, FeatureDropDuplicates,
		FeatureStaticJoin, FeatureStreamJoin,
		FeatureDeltaSink, FeatureFilesSink, FeatureKafkaSink, FeaturePostgresSink, FeatureWebhookSink, FeatureConsoleSink,
		FeatureUpdateMode, FeatureCompleteMode,
	)
}

// Features is a set of features. The zero value is the empty set. A Features is never
// changed after it is made; With returns a new set.
type Features struct {
	set map[Feature]bool
}

// NewFeatures returns the set of fs.
func NewFeatures(fs ...Feature) Features {
	set := make(map[Feature]bool, len(fs))
	for _, f := range fs {
		set[f] = true
	}
	return Features{set: set}
}

// With returns the union of f and fs.
func (f Features) With(fs ...Feature) Features {
	set := maps.Clone(f.set)
	if set == nil {
		set = make(map[Feature]bool, len(fs))
	}
	for _, x := range fs {
		set[x] = true
	}
	return Features{set: set}
}

// Has reports whether x is in f.
func (f Features) Has(x Feature) bool { return f.set[x] }

// List returns the features in f, sorted.
func (f Features) List() []Feature { return slices.Sorted(maps.Keys(f.set)) }

func sourceFeature(k SourceKind) Feature { return Feature("source." + string(k)) }
func stepFeature(k StepKind) Feature     { return Feature("step." + string(k)) }
func sinkFeature(k SinkKind) Feature     { return Feature("sink." + string(k)) }

func modeFeature(m OutputMode) (Feature, bool) {
	switch m {
	case OutputUpdate:
		return FeatureUpdateMode, true
	case OutputComplete:
		return FeatureCompleteMode, true
	}
	return "", false
}
