package kafka

import (
	"context"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
)

// Default timeouts of the components.
const (
	// DefaultConnectTimeout bounds how long a component waits at start for a
	// broker to answer.
	DefaultConnectTimeout = 30 * time.Second
	// DefaultBrokerTimeout bounds how long a running component waits for the
	// brokers to come back before it fails the query.
	DefaultBrokerTimeout = 2 * time.Minute
)

// Opt configures the components that SourceWith and SinkWith build.
type Opt interface {
	apply(*options)
}

type optFunc func(*options)

func (f optFunc) apply(o *options) { f(o) }

type options struct {
	connectTimeout time.Duration
	brokerTimeout  time.Duration
	// getenv, when set, reads credentials instead of the environment the engine gives.
	getenv func(string) string
}

// env returns the function that reads credentials: WithGetenv's, else the engine's
// (SourceEnv.Getenv, SinkEnv.Getenv; os.Getenv when that is nil).
func (o options) env(engine func(string) string) func(string) string {
	if o.getenv != nil {
		return o.getenv
	}
	return engine
}

func newOptions(opts []Opt) options {
	o := options{connectTimeout: DefaultConnectTimeout, brokerTimeout: DefaultBrokerTimeout}
	for _, opt := range opts {
		opt.apply(&o)
	}
	return o
}

// WithConnectTimeout bounds how long a component waits at start for a broker
// to answer, overriding DefaultConnectTimeout (30s). A context deadline that
// comes sooner wins.
func WithConnectTimeout(d time.Duration) Opt {
	return optFunc(func(o *options) { o.connectTimeout = d })
}

// WithBrokerTimeout bounds how long a running component retries when no
// broker answers (a broker restart), overriding DefaultBrokerTimeout (2m).
// After it, the batch fails and the next run replays it.
func WithBrokerTimeout(d time.Duration) Opt {
	return optFunc(func(o *options) { o.brokerTimeout = d })
}

// WithGetenv reads the SASL and Schema Registry credentials through getenv instead of the
// environment the engine gives its components (engine.WithEnv): for a program that builds
// components itself, as the tests do.
func WithGetenv(getenv func(string) string) Opt {
	return optFunc(func(o *options) { o.getenv = getenv })
}

// NewSource builds a Kafka source with the default options. It is an
// engine.SourceConstructor.
func NewSource(ctx context.Context, spec *v1.Source, env engine.SourceEnv) (engine.Source, error) {
	return newSource(ctx, spec, env, newOptions(nil))
}

// SourceWith returns a constructor of Kafka sources with opts.
func SourceWith(opts ...Opt) engine.SourceConstructor {
	o := newOptions(opts)
	return func(ctx context.Context, spec *v1.Source, env engine.SourceEnv) (engine.Source, error) {
		return newSource(ctx, spec, env, o)
	}
}

// NewSink builds a Kafka sink with the default options. It is an
// engine.SinkConstructor.
func NewSink(ctx context.Context, spec *v1.Sink, env engine.SinkEnv) (engine.Sink, error) {
	return newSink(ctx, spec, env, newOptions(nil))
}

// SinkWith returns a constructor of Kafka sinks with opts.
func SinkWith(opts ...Opt) engine.SinkConstructor {
	o := newOptions(opts)
	return func(ctx context.Context, spec *v1.Sink, env engine.SinkEnv) (engine.Sink, error) {
		return newSink(ctx, spec, env, o)
	}
}
