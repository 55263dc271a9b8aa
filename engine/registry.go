package engine

import (
	"fmt"
	"maps"
	"slices"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// ComponentSpec describes a source or sink kind for people and tools: what
// it does, its fields with their defaults, and (for a sink) its guarantee.
// The component tables in docs/ are rendered from it.
type ComponentSpec struct {
	// Summary is one sentence saying what the component does.
	Summary string
	// Fields lists the spec fields the component reads.
	Fields []FieldSpec
}

// FieldSpec describes one field of a component's spec.
type FieldSpec struct {
	Name        string
	Default     string
	Description string
}

// Registry maps source and sink kinds to their constructors. It is a value:
// the program that runs queries makes one with NewRegistry and registers
// each kind explicitly; nothing registers itself. A Registry is not safe for
// concurrent registration; register everything before running queries, after
// which it is safe for concurrent use.
type Registry struct {
	sources map[v1.SourceKind]sourceEntry
	sinks   map[v1.SinkKind]sinkEntry
	statics map[v1.StaticSideKind]staticEntry
}

type staticEntry struct {
	spec ComponentSpec
	new  StaticConstructor
}

type sourceEntry struct {
	spec ComponentSpec
	new  SourceConstructor
}

type sinkEntry struct {
	spec ComponentSpec
	new  SinkConstructor
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{sources: map[v1.SourceKind]sourceEntry{}, sinks: map[v1.SinkKind]sinkEntry{}, statics: map[v1.StaticSideKind]staticEntry{}}
}

// RegisterSource registers the constructor of a source kind. It errors if
// the kind is taken or the constructor is nil.
func (r *Registry) RegisterSource(kind v1.SourceKind, spec ComponentSpec, c SourceConstructor) error {
	if _, taken := r.sources[kind]; taken {
		return fmt.Errorf("register source kind %q: already registered", kind)
	}
	if kind == "" || c == nil {
		return fmt.Errorf("register source kind %q: want a kind and a constructor", kind)
	}
	r.sources[kind] = sourceEntry{spec: spec, new: c}
	return nil
}

// RegisterSink registers the constructor of a sink kind. It errors if the
// kind is taken or the constructor is nil.
func (r *Registry) RegisterSink(kind v1.SinkKind, spec ComponentSpec, c SinkConstructor) error {
	if _, taken := r.sinks[kind]; taken {
		return fmt.Errorf("register sink kind %q: already registered", kind)
	}
	if kind == "" || c == nil {
		return fmt.Errorf("register sink kind %q: want a kind and a constructor", kind)
	}
	r.sinks[kind] = sinkEntry{spec: spec, new: c}
	return nil
}

// RegisterStatic registers the constructor of a static join side's kind (delta, files). It
// errors if the kind is taken or the constructor is nil.
func (r *Registry) RegisterStatic(kind v1.StaticSideKind, spec ComponentSpec, c StaticConstructor) error {
	if _, taken := r.statics[kind]; taken {
		return fmt.Errorf("register static side kind %q: already registered", kind)
	}
	if kind == "" || c == nil {
		return fmt.Errorf("register static side kind %q: want a kind and a constructor", kind)
	}
	r.statics[kind] = staticEntry{spec: spec, new: c}
	return nil
}

// StaticKinds returns the registered static side kinds, sorted.
func (r *Registry) StaticKinds() []v1.StaticSideKind { return slices.Sorted(maps.Keys(r.statics)) }

// SourceKinds returns the registered source kinds, sorted.
func (r *Registry) SourceKinds() []v1.SourceKind { return slices.Sorted(maps.Keys(r.sources)) }

// SinkKinds returns the registered sink kinds, sorted.
func (r *Registry) SinkKinds() []v1.SinkKind { return slices.Sorted(maps.Keys(r.sinks)) }

// SourceSpec returns the spec a source kind was registered with.
func (r *Registry) SourceSpec(kind v1.SourceKind) (ComponentSpec, bool) {
	e, ok := r.sources[kind]
	return e.spec, ok
}

// SinkSpec returns the spec a sink kind was registered with.
func (r *Registry) SinkSpec(kind v1.SinkKind) (ComponentSpec, bool) {
	e, ok := r.sinks[kind]
	return e.spec, ok
}
