package engine

import (
	"context"
	"io"
	"log/slog"
	"os"
	"time"

	"k8s.io/utils/clock"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
)

// Option configures New. Options are applied in order; a later one wins.
type Option interface {
	apply(*options)
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	location   string
	owner      *checkpoint.Owner
	s3         []s3.Option
	getenv     func(string) string
	logger     *slog.Logger
	clock      clock.Clock
	observer   Observer
	hook       func(Phase, int64)
	guard      StartGuard
	stdout     io.Writer
	idlePoll   time.Duration
	purgeEvery int64
}

func defaultOptions() options {
	return options{
		logger:     slog.New(slog.DiscardHandler),
		clock:      clock.RealClock{},
		stdout:     os.Stdout,
		idlePoll:   DefaultIdlePoll,
		purgeEvery: 10,
		getenv:     os.Getenv,
	}
}

// DefaultIdlePoll is how long the default trigger waits before asking the
// sources again when none had new data, unless a source wakes it sooner
// (SourceEnv.Wake: the Kafka source does when records arrive).
const DefaultIdlePoll = 100 * time.Millisecond

// WithCheckpoint sets the checkpoint location, overriding
// spec.checkpoint.location. Without either, Run fails. Relative local paths
// are resolved against the working directory.
func WithCheckpoint(location string) Option {
	return optionFunc(func(o *options) { o.location = location })
}

// WithOwner sets the owner recorded in, and checked against, the
// checkpoint's metadata. The default is the query's namespace, name and uid.
func WithOwner(owner checkpoint.Owner) Option {
	return optionFunc(func(o *options) { o.owner = &owner })
}

// WithS3 sets the S3 settings of s3:// locations — the checkpoint's and those
// of sources, sinks and dead-letter folders — as options over the
// environment's (package checkpoint/s3 defines the variables). A source or
// sink with its own spec.s3 settings applies them on top. The default is the
// environment alone.
func WithS3(opts ...s3.Option) Option {
	return optionFunc(func(o *options) { o.s3 = append(o.s3[:len(o.s3):len(o.s3)], opts...) })
}

// WithEnv reads the environment — the S3 defaults, the credentials of a
// source's or sink's own spec.s3 — through getenv instead of os.Getenv.
func WithEnv(getenv func(string) string) Option {
	return optionFunc(func(o *options) { o.getenv = getenv })
}

// WithLogger sets the logger; the default discards everything.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(o *options) { o.logger = l })
}

// WithClock sets the clock that stamps batches and paces triggers; the
// default is the real clock. Tests pass k8s.io/utils/clock/testing's fake.
func WithClock(c clock.Clock) Option {
	return optionFunc(func(o *options) { o.clock = c })
}

// WithObserver sets the observer told of the run's start and of every
// committed batch. The default observes nothing.
func WithObserver(obs Observer) Option {
	return optionFunc(func(o *options) { o.observer = obs })
}

// WithPhaseHook sets a function called, from the engine's goroutine, each
// time a batch passes a Phase. It is for crash tests: `lockstep run` uses it
// to kill itself at a phase (CrashAtEnv). The default does nothing.
func WithPhaseHook(hook func(phase Phase, batch int64)) Option {
	return optionFunc(func(o *options) { o.hook = hook })
}

// CrashAtEnv is the environment variable that makes `lockstep run` SIGKILL
// itself when a batch reaches a phase: <phase>:<batch>, phase one of
// Phases(). The Spark runner reads it too (spark/runner's Crash class), in a
// JVM whose kill points a test armed. For crash tests only.
const CrashAtEnv = "LOCKSTEP_CRASH_AT"

// StartGuard checks, once per run, that a query may run on its checkpoint.
// It is called after the checkpoint is claimed and its head read, before any
// component is built or batch planned. An error refuses the run: Run returns
// it wrapped with ErrRefused.
//
// This is where the compat package's start guard belongs (defence in depth
// behind `lockstep plan` and the admission webhook): read the shape the
// committed batches ran under (req.Checkpoint.Shape at req.Head.Committed),
// Check it against req.Spec, and record the spec's shape with
// req.Checkpoint.RecordShape(ctx, req.NextBatch, shape) when it changed.
// NextBatch is the first batch this run executes (a replayed batch already
// runs with the new spec's logic).
type StartGuard func(ctx context.Context, req GuardRequest) error

// GuardRequest is the input of a StartGuard.
type GuardRequest struct {
	Checkpoint *checkpoint.Checkpoint
	Spec       *v1.StreamingQuerySpec
	Head       checkpoint.Head
	// NextBatch is the first batch the run executes.
	NextBatch int64
	// Getenv reads the engine's environment, as sinks do (SinkEnv.Getenv).
	Getenv func(string) string
	// Retained asks the sources whether they still hold what the replay would read
	// (Query.CheckRetained); nil on a runtime that cannot ask them.
	Retained func(context.Context, checkpoint.Replay) error
}

// WithStartGuard sets the start guard. The default admits every query.
func WithStartGuard(g StartGuard) Option {
	return optionFunc(func(o *options) { o.guard = g })
}

// WithStdout sets where the console sink prints; the default is os.Stdout.
func WithStdout(w io.Writer) Option {
	return optionFunc(func(o *options) { o.stdout = w })
}

// WithIdlePoll sets how long the default trigger waits when no source has
// new data, overriding DefaultIdlePoll.
func WithIdlePoll(d time.Duration) Option {
	return optionFunc(func(o *options) { o.idlePoll = d })
}
