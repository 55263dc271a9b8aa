package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/metrics"
	"github.com/lockstep-dev/lockstep/engine/spark"
)

// overrideRuntime applies `lockstep run --runtime`: spark runs the spec on Spark (keeping its
// spark sizing when it has some), lockstep on the built-in engine; "" keeps the spec's.
func overrideRuntime(spec *v1.StreamingQuerySpec, runtime v1.RuntimeName) {
	switch runtime {
	case v1.RuntimeSpark:
		if spec.Runtime.Spark == nil {
			spec.Runtime.Spark = &v1.SparkRuntime{}
		}
	case v1.RuntimeLockstep:
		spec.Runtime.Spark = nil
	}
}

// runSpark runs the query on Spark: the same progress lines, exit codes and signals as the
// built-in engine (docs/spark.md). With httpAddr it serves the query's page and metrics there,
// the Spark driver's and executors' metrics included. hook, if not nil, is LOCKSTEP_CRASH_AT's
// kill point (crashHook), which a rebuild on Spark passes (spark.Options.PhaseHook).
func runSpark(ctx context.Context, obj *v1.StreamingQuery, file, location, progress, httpAddr string, hook func(engine.Phase, int64), stdout, stderr io.Writer) error {
	runner, err := spark.FindRunner()
	if err != nil {
		return withExitCode(exitFailure, err)
	}
	var ui sparkUI
	var gather []metrics.Option
	if httpAddr != "" {
		if ui, err = newSparkUI(obj); err != nil {
			return withExitCode(exitFailure, err)
		}
		gather = append(gather, ui.metrics)
	}
	out, err := newRunOutput(obj, location, progress, httpAddr, stderr, ", Spark's included", gather...)
	if err != nil {
		return err
	}
	defer out.stop()
	logger := out.logger
	q, err := spark.New(obj, spark.Options{
		Location:  location,
		Runner:    runner,
		Observer:  out.observer,
		Stdout:    stdout,
		Guard:     compatGuard(logger),
		Adopt:     sparkAdoptGuard(logger),
		Logger:    logger,
		Conf:      ui.conf,
		PhaseHook: hook,
	})
	if ise := (*engine.InvalidSpecError)(nil); errors.As(err, &ise) {
		return withExitCode(exitInvalid, invalidSpec(file, ise))
	}
	if err != nil {
		return withExitCode(exitFailure, err)
	}
	out.printer.note("runtime spark: the Spark driver's log is " + q.LogPath())
	return out.run(ctx, q)
}

// refuseSparkCheckpoint refuses to run the built-in engine on a checkpoint the spark runtime
// wrote (it holds spark.RecordsDir): the runtime is pinned (compat rule runtime).
func refuseSparkCheckpoint(ctx context.Context, obj *v1.StreamingQuery, location string) error {
	if location == "" {
		location = obj.Spec.Checkpoint.Location
	}
	store, err := checkpoint.Open(ctx, location+"/"+spark.RecordsDir, checkpoint.WithS3(s3.Opener(s3.ReadOnly())))
	if err != nil {
		return nil // the engine reports an unusable location itself
	}
	if _, err := store.Get(ctx, checkpoint.MetadataKey); err != nil {
		return nil
	}
	return fmt.Errorf("%w: %s was written by the spark runtime; the runtime cannot change on a checkpoint (rule runtime, docs/compatibility.md): run it with --runtime spark, or start fresh at a new checkpoint location", engine.ErrRefused, location)
}

// openCheckpointStore opens the store of the checkpoint at location for reading Lockstep's
// records: the location itself for the built-in engine, its spark.RecordsDir folder for a
// checkpoint the spark runtime wrote (Spark's own files sit at the location), so that
// `plan` and `checkpoint describe` read the shape and batches of either.
func openCheckpointStore(ctx context.Context, location string, opts ...checkpoint.OpenOption) (checkpoint.Store, error) {
	store, err := checkpoint.Open(ctx, location, opts...)
	if err != nil {
		return nil, err
	}
	if _, err := store.Get(ctx, spark.RecordsDir+"/"+checkpoint.MetadataKey); err == nil {
		return checkpoint.Open(ctx, strings.TrimSuffix(location, "/")+"/"+spark.RecordsDir, opts...)
	}
	return store, nil
}
