package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/utils/clock"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/compat"
	"github.com/lockstep-dev/lockstep/controller"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/metrics"
	"github.com/lockstep-dev/lockstep/engine/webhook"
	"github.com/lockstep-dev/lockstep/internal/gctune"
	"github.com/lockstep-dev/lockstep/internal/pgserver"
)

// maxTerminationMessage is what Kubernetes keeps of a termination message.
const maxTerminationMessage = 4096

func newEngineCommand() *cobra.Command {
	var cfg engineConfig
	cmd := &cobra.Command{
		Use:   "engine --query /etc/lockstep/query.yaml",
		Short: "Run a streaming query as a Kubernetes pod (the controller's engine entrypoint)",
		Long: `Run the StreamingQuery in --query, as rendered by the controller, until its trigger
ends or the pod is stopped. It is 'lockstep run' for a pod:

  - The checkpoint is the spec's checkpoint.location; its owner is the query's namespace and
    name, so a query deleted with checkpoint retention Retain and created again continues.
  - Before the first batch the spec is checked with compat against the checkpoint's newest
    shape (exit 3 when refused), and the new shape is recorded when it changed.
  - /healthz fails when no trigger has finished (a batch committed, or no new data
    found) within the spec's progress timeout (spec.engine.progressTimeout; default three
    processingTime intervals, at least 5m), so that a liveness probe restarts a stuck
    engine; /readyz answers once the checkpoint is claimed and until a stop begins.
  - The same port serves the query's Prometheus metrics at /metrics (docs/observability.md);
    for a spark query, the Spark driver's and executors' metrics too (docs/spark.md).
  - SIGTERM stops after the current batch commits (set the pod's grace period long enough
    for a batch); a second SIGTERM exits at once (the next start replays that batch).
  - Before it exits the engine writes one line to --termination-message-path: the error, or
    "completed: …" / "stopped: …".

Progress is logged as JSON on standard error, one line per committed batch.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.stderr = cmd.ErrOrStderr()
			return runEngine(cmd.Context(), cfg)
		},
	}
	cmd.Flags().StringVar(&cfg.query, "query", "/etc/lockstep/query.yaml", "the StreamingQuery manifest the controller rendered")
	cmd.Flags().StringVar(&cfg.healthAddr, "health-addr", ":8081", "address of the HTTP port: health (/healthz, /readyz), Prometheus metrics (/metrics), the query page (/); empty disables it")
	cmd.Flags().StringVar(&cfg.terminationPath, "termination-message-path", "/dev/termination-log", "file that receives the reason the engine exited; empty disables it")
	cmd.Flags().StringVar(&cfg.sparkConf, "spark-conf", "", "a spark query's Spark settings on Kubernetes (a JSON object the controller rendered); empty runs Spark in local mode")
	cmd.Flags().StringVar(&cfg.webhookHeadersDir, "webhook-headers-dir", webhook.DefaultHeadersDir, "folder where the webhook sink's headersSecretName is mounted, one file per header")
	return cmd
}

type engineConfig struct {
	query, healthAddr, terminationPath, webhookHeadersDir, sparkConf string
	// stderr receives the JSON log; os.Stderr when nil.
	stderr io.Writer
}

// runEngine runs the query and writes the termination message; its error decides the exit code.
func runEngine(ctx context.Context, cfg engineConfig) error {
	stderr := cfg.stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	msg, err := runEngineQuery(ctx, cfg, log)
	if err != nil {
		msg = err.Error()
		log.Error("Engine failed", "error", msg)
	}
	if cfg.terminationPath != "" {
		if len(msg) > maxTerminationMessage {
			msg = msg[:maxTerminationMessage-3] + "..."
		}
		if werr := os.WriteFile(cfg.terminationPath, []byte(msg), 0o644); werr != nil {
			log.Warn("Could not write the termination message", "path", cfg.terminationPath, "error", werr.Error())
		}
	}
	return err
}

func runEngineQuery(ctx context.Context, cfg engineConfig, log *slog.Logger) (string, error) {
	log.Info("Garbage collector set", "settings", gctune.Tune().String()) // docs/engine.md
	obj, err := readQueryFile(cfg.query)
	if err != nil {
		return "", withExitCode(exitInvalid, err)
	}
	reg, err := newRegistry(webhook.WithHeadersDir(cfg.webhookHeadersDir))
	if err != nil {
		return "", err
	}
	health := newEngineHealth(log, clock.RealClock{}, obj.Spec.ProgressTimeout(), obj.Spec.StartTimeout())
	mopts := []metrics.Option{metrics.WithProcessCollectors()}
	var ui sparkUI
	if obj.Spec.Runtime.Spark != nil && cfg.healthAddr != "" {
		// The driver's and executors' Spark metrics join the query's on the same port.
		if ui, err = newSparkUI(obj); err != nil {
			return "", err
		}
		mopts = append(mopts, ui.metrics)
	}
	srv := newQueryServer(obj, "", mopts...)
	log = slog.New(srv.ring.LogHandler(log.Handler()))
	var q engine.Runtime
	if obj.Spec.Runtime.Spark != nil {
		q, err = newSparkEngine(obj, cfg, ui.conf, log, append(observers{health}, srv.observers()...))
	} else {
		q, err = engine.New(obj, reg,
			engine.WithStartGuard(compatGuard(log)),
			engine.WithLogger(log),
			engine.WithObserver(append(observers{health}, srv.observers()...)),
			engine.WithStdout(os.Stdout),
		)
	}
	if ise := (*engine.InvalidSpecError)(nil); errors.As(err, &ise) {
		return "", withExitCode(exitInvalid, invalidSpec(cfg.query, ise))
	}
	if err != nil {
		return "", err
	}
	if cfg.healthAddr != "" {
		mux := health.handler()
		srv.register(mux)
		_, stop, err := serveHTTP(cfg.healthAddr, mux)
		if err != nil {
			return "", fmt.Errorf("health endpoint: %w", err)
		}
		defer stop()
	}

	defer stopEngineOnSignals(q, health, cfg, log)()

	sum, err := q.Run(ctx)
	srv.ring.Ended(time.Now(), err)
	if err != nil {
		if errors.Is(err, engine.ErrRefused) {
			return "", withExitCode(exitRefused, err)
		}
		return "", withExitCode(exitFailure, err)
	}
	log.Info("Engine stopped", "reason", string(sum.Reason), "batches", sum.Batches, "lastCommitted", sum.LastCommitted,
		"inputRows", sum.NumInputRows, "outputRows", sum.NumOutputRows)
	what := "stopped"
	if sum.Reason == engine.StopTriggerDone {
		what = "completed"
	}
	return fmt.Sprintf("%s: %d batches this run, last committed batch %d", what, sum.Batches, sum.LastCommitted), nil
}

// stopEngineOnSignals stops q after its current batch on SIGINT or SIGTERM, and exits at once
// on a second signal, saying why in the log and in the termination message; release ends it.
func stopEngineOnSignals(q engine.Runtime, health *engineHealth, cfg engineConfig, log *slog.Logger) (release func()) {
	return stopOnSignals(q.Stop, func() {
		health.stopping.Store(true)
		if stuck := health.stuck(); stuck != "" {
			// Most likely the liveness probe's restart: the kubelet kills the engine after a
			// short grace period, before it can say why; say it now.
			log.Warn("Stopping a stuck engine; the next start replays the interrupted batch", "reason", stuck)
			if cfg.terminationPath != "" {
				_ = os.WriteFile(cfg.terminationPath, []byte(controller.StuckMessage+stuck), 0o644)
			}
			return
		}
		log.Info("Stopping after the current batch")
	}, func() {
		log.Warn("Exiting at once; the next start replays the interrupted batch")
		if cfg.terminationPath != "" {
			_ = os.WriteFile(cfg.terminationPath, []byte("killed: a second signal ended the engine mid-batch"), 0o644)
		}
	})
}

// compatGuard is the engine's start guard (DESIGN.md §5, defence in depth): it judges the
// spec against the shape the committed batches ran under with compat.Judge, logs warnings,
// and records the spec's shape from the first batch it runs. A shape recorded by an earlier
// start that ran no batch (a change applied twice before the next batch) is neither judged
// against nor kept: RecordShape replaces it.
func compatGuard(log *slog.Logger) engine.StartGuard {
	return func(ctx context.Context, req engine.GuardRequest) error {
		var facts compat.Facts
		old, _, err := compat.ReadShape(ctx, req.Checkpoint)
		switch {
		case errors.Is(err, checkpoint.ErrNotFound):
		case err != nil:
			return fmt.Errorf("read the checkpoint's shape: %w", err)
		default:
			facts.Committed = &old
		}
		j, err := judgeAtStart(log, facts, req.Spec, req.Getenv)
		if rej := (*compat.RejectedError)(nil); errors.As(err, &rej) && req.Spec.OnIncompatibleChange == v1.OnIncompatibleRebuild && rej.Verdict.RebuildAnswers() {
			// The spec asks to rebuild the state for a change only the state stands in the way
			// of: judge again knowing whether the logs allow it.
			facts.Rebuild = compat.ReadRebuild(ctx, req.Checkpoint)
			switch {
			case facts.Rebuild.Impossible != "":
			case req.Retained != nil:
				withRetention(facts.Rebuild, req.Retained(ctx, facts.Rebuild.Replay))
			default:
				facts.Rebuild.Unchecked = "the runtime did not ask its sources"
			}
			j, err = judgeAtStart(log, facts, req.Spec, req.Getenv)
			if why := facts.Rebuild.Impossible; why != "" && errors.As(err, &rej) {
				err = fmt.Errorf("%w\n  spec.onIncompatibleChange: rebuild cannot answer it: %s", err, why)
			}
		}
		if need := (*compat.RebuildRequiredError)(nil); errors.As(err, &need) {
			return fmt.Errorf("%w: %w", engine.ErrRebuildRequired, err)
		}
		if err != nil {
			return err
		}
		if facts.Committed != nil && old.Equal(j.Shape) {
			// Unchanged since the committed batches, unless an earlier start that ran no
			// batch recorded another shape for the next one: that entry must go.
			if _, err := req.Checkpoint.ShapeEntry(ctx, req.NextBatch); err != nil {
				if errors.Is(err, checkpoint.ErrNotFound) {
					return nil
				}
				return err
			}
		}
		return compat.RecordShape(ctx, req.Checkpoint, req.NextBatch, j.Shape)
	}
}

// judgeAtStart is what both runtimes' start guards do with the one judge: judge spec against
// facts, log each warning, and return the judgement, or the rejection (a
// *compat.RejectedError) before anything is written.
func judgeAtStart(log *slog.Logger, facts compat.Facts, spec *v1.StreamingQuerySpec, getenv func(string) string) (compat.Judgement, error) {
	pg, note := postgresServer(&spec.Sink, getenv)
	if note != "" {
		log.Warn("Judging the postgres sink by its connection's name", "reason", note)
	}
	j, err := compat.Judge(facts, spec, pg)
	if err != nil {
		return j, err
	}
	if err := j.Err(); err != nil {
		return j, err
	}
	for _, f := range j.Warnings() {
		log.Warn("Change allowed with a warning", "rule", f.Rule, "path", f.Path, "old", f.Old, "new", f.New, "message", f.Message, "remedy", f.Remedy)
	}
	return j, nil
}

// postgresServer returns the compat option that names the server and database of a postgres
// sink's connection string in the environment (getenv; os.Getenv when nil), the sink's
// identity in the shape. When the string cannot be read it returns the option of no server
// (the Secret's or variable's name then identifies the sink) and a note saying why; for
// another sink, no note.
func postgresServer(sink *v1.Sink, getenv func(string) string) (compat.Option, string) {
	if sink.Postgres == nil {
		return compat.WithPostgresServer(""), ""
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	server, err := pgserver.FromEnv(sink.Postgres.Connection, getenv)
	if err != nil {
		return compat.WithPostgresServer(""), err.Error() + ": the postgres sink is judged by where its connection string comes from, not by its server and database"
	}
	return compat.WithPostgresServer(server), ""
}

// engineHealth serves the health endpoint and logs progress; it is the run's Observer.
// /healthz fails once no trigger has finished (a batch committed, or no new data found)
// within bound since the last one, or within startBound since the process started: the engine
// is stuck (a source or sink that blocks, a deadlock), and the kubelet's liveness probe
// restarts it. /readyz answers once the checkpoint is claimed and until a stop begins.
type engineHealth struct {
	log        *slog.Logger
	clock      clock.PassiveClock
	bound      time.Duration
	startBound time.Duration
	started    atomic.Bool
	stopping   atomic.Bool
	// triggered says whether a trigger has finished since the process started.
	triggered atomic.Bool
	// progress is when the engine last showed progress, in Unix nanoseconds.
	progress atomic.Int64
}

var _ engine.IdleObserver = (*engineHealth)(nil)

// newEngineHealth returns the health of an engine that started now: its first trigger must
// finish within startBound (the spec's StartTimeout), every later one within bound.
func newEngineHealth(log *slog.Logger, clk clock.PassiveClock, bound, startBound time.Duration) *engineHealth {
	h := &engineHealth{log: log, clock: clk, bound: bound, startBound: max(bound, startBound)}
	h.progress.Store(clk.Now().UnixNano())
	return h
}

// progressed records a finished trigger.
func (h *engineHealth) progressed(at time.Time) {
	h.progress.Store(at.UnixNano())
	h.triggered.Store(true)
}

func (h *engineHealth) Started(s engine.Start) {
	h.progress.Store(h.clock.Now().UnixNano()) // the checkpoint is claimed: the start's bound counts from here
	h.started.Store(true)
	h.log.Info("Engine started", "queryId", s.QueryID, "checkpoint", s.Location, "nextBatch", s.NextBatch,
		"replay", s.Replay, "new", s.New, "trigger", s.Trigger, "guarantee", s.Guarantee.String(),
		"progressTimeout", h.bound.String())
}

func (h *engineHealth) Committed(p engine.Progress) {
	h.progressed(h.clock.Now())
	h.log.Info("Batch committed", "batch", p.Batch, "inputRows", p.NumInputRows, "outputRows", p.NumOutputRows,
		"durationMs", p.DurationMs[checkpoint.DurationTotal], "replay", p.Replay)
}

func (h *engineHealth) Idle(at time.Time) { h.progressed(at) }

// Rebuilt: each batch a rebuild replays is progress too.
func (h *engineHealth) Rebuilt(done, total int64, p engine.Progress) {
	h.progressed(h.clock.Now())
	h.log.Info("Rebuilt batch", "batch", p.Batch, "done", done, "total", total, "inputRows", p.NumInputRows)
}

// stuck says how long no trigger has finished when that is longer than the bound, else "".
func (h *engineHealth) stuck() string {
	since := h.clock.Since(time.Unix(0, h.progress.Load()))
	switch {
	case !h.triggered.Load() && since > h.startBound:
		return fmt.Sprintf("no trigger finished in the %s since the engine started, more than the progress timeout (spec.engine.progressTimeout) and the start's grace allow (%s)",
			since.Round(time.Second), h.startBound)
	case h.triggered.Load() && since > h.bound:
		return fmt.Sprintf("no trigger finished for %s, more than the progress timeout %s (spec.engine.progressTimeout)",
			since.Round(time.Second), h.bound)
	}
	return ""
}

// handler returns the health endpoint's handler; the query's page and metrics are added to it.
func (h *engineHealth) handler() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if stuck := h.stuck(); stuck != "" {
			http.Error(w, "stuck: "+stuck, http.StatusServiceUnavailable)
			return
		}
		since := h.clock.Since(time.Unix(0, h.progress.Load()))
		fmt.Fprintf(w, "ok: last progress %s ago\n", since.Round(time.Millisecond))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case h.stopping.Load():
			http.Error(w, "stopping at a batch boundary", http.StatusServiceUnavailable)
		case !h.started.Load():
			http.Error(w, "starting: the checkpoint is not claimed yet", http.StatusServiceUnavailable)
		default:
			fmt.Fprintln(w, "ok")
		}
	})
	return mux
}
