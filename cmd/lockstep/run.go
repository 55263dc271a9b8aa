package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/delta"
	"github.com/lockstep-dev/lockstep/engine/kafka"
	"github.com/lockstep-dev/lockstep/engine/metrics"
	"github.com/lockstep-dev/lockstep/engine/postgres"
	"github.com/lockstep-dev/lockstep/engine/sink"
	"github.com/lockstep-dev/lockstep/engine/source"
	"github.com/lockstep-dev/lockstep/engine/webhook"
	"github.com/lockstep-dev/lockstep/internal/gctune"
)

// Progress output formats.
const (
	progressText = "text"
	progressJSON = "json"
)

func newRunCommand() *cobra.Command {
	var file, location, progress, httpAddr, runtime string
	cmd := &cobra.Command{
		Use:   "run -f QUERY.yaml",
		Short: "Run a streaming query on this machine",
		Long: `Run a StreamingQuery on this machine, with its checkpoint in a local folder or on S3.

The checkpoint location is --checkpoint, else the spec's checkpoint.location, else
./.lockstep/checkpoints/<namespace>/<name>. A second run on the same location resumes
after the last committed batch (or re-runs a batch the last run planned but did not commit).

Progress goes to standard error: one line (or JSON object) per batch and a summary at
the end; the console sink prints rows on standard output. SIGINT or SIGTERM stops the
query after the current batch (exit 0); a second signal exits at once (exit 1; the
next run replays the interrupted batch).

--runtime spark runs the query on Apache Spark (local mode, the runner built by
make tools) instead of the built-in engine, without editing the file; --runtime
lockstep the other way. The Spark driver's log goes to a file the run names.

Exit codes: 0 done or stopped, 1 runtime failure, 2 invalid spec or unreadable file,
3 the checkpoint refuses this query (another query's checkpoint, or another engine
is running on it).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if progress != progressText && progress != progressJSON {
				return withExitCode(exitInvalid, fmt.Errorf("--progress %q: want text or json", progress))
			}
			switch v1.RuntimeName(runtime) {
			case "", v1.RuntimeLockstep, v1.RuntimeSpark:
			default:
				return withExitCode(exitInvalid, fmt.Errorf("--runtime %q: want lockstep or spark", runtime))
			}
			return runQueryOn(cmd.Context(), file, location, progress, httpAddr, v1.RuntimeName(runtime), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the StreamingQuery manifest (YAML or JSON)")
	cmd.Flags().StringVar(&location, "checkpoint", "", "the checkpoint location: a path, file:///path or s3://bucket/prefix (default: the spec's, else ./.lockstep/checkpoints/<namespace>/<name>)")
	cmd.Flags().StringVar(&progress, "progress", progressText, "progress output on standard error: text or json")
	cmd.Flags().StringVar(&runtime, "runtime", "", "run on this runtime whatever the spec says: lockstep (the built-in engine) or spark (default: the spec's spec.runtime)")
	cmd.Flags().StringVar(&httpAddr, "http", "", "serve the query's page (/), progress (/api/progress) and Prometheus metrics (/metrics) on this address, e.g. 127.0.0.1:4040 (default: off)")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

// newRegistry returns the registry of every source and sink kind this
// program runs; opts configure the webhook sink.
func newRegistry(opts ...webhook.Opt) (*engine.Registry, error) {
	reg := engine.NewRegistry()
	return reg, errors.Join(
		reg.RegisterSource(v1.SourceFiles, source.FilesSpec(), source.NewFiles),
		reg.RegisterSource(v1.SourceRate, source.RateSpec(), source.NewRate),
		reg.RegisterSource(v1.SourceNexmark, source.NexmarkSpec(), source.NewNexmark),
		reg.RegisterSink(v1.SinkFiles, sink.FilesSpec(), sink.NewFiles),
		reg.RegisterSink(v1.SinkConsole, sink.ConsoleSpec(), sink.NewConsole),
		reg.RegisterSource(v1.SourceKafka, kafka.SourceSpec(), kafka.NewSource),
		reg.RegisterSink(v1.SinkKafka, kafka.SinkSpec(), kafka.NewSink),
		reg.RegisterSink(v1.SinkWebhook, webhook.SinkSpec(), webhook.SinkWith(opts...)),
		reg.RegisterSource(v1.SourceDelta, delta.SourceSpec(), delta.NewSource),
		reg.RegisterStatic(v1.StaticDeltaKind, delta.StaticSpec(), delta.NewStatic),
		reg.RegisterStatic(v1.StaticFilesKind, source.StaticFilesSpec(), source.NewStaticFiles),
		reg.RegisterStatic(v1.StaticPostgresKind, postgres.StaticSpec(), postgres.NewStatic),
		reg.RegisterSink(v1.SinkDelta, delta.SinkSpec(), delta.NewSink),
		reg.RegisterSink(v1.SinkPostgres, postgres.SinkSpec(), postgres.NewSink),
	)
}

func runQuery(ctx context.Context, file, location, progress, httpAddr string, stdout, stderr io.Writer) error {
	return runQueryOn(ctx, file, location, progress, httpAddr, "", stdout, stderr)
}

// runQueryOn is runQuery on the given runtime ("": the spec's).
func runQueryOn(ctx context.Context, file, location, progress, httpAddr string, runtime v1.RuntimeName, stdout, stderr io.Writer) error {
	gctune.Tune() // docs/engine.md, "Memory and garbage collection"
	obj, err := readQueryFile(file)
	if err != nil {
		return withExitCode(exitInvalid, err)
	}
	overrideRuntime(&obj.Spec, runtime)
	if location == "" && obj.Spec.Checkpoint.Location == "" {
		location = filepath.Join(".lockstep", "checkpoints", obj.Namespace, obj.Name)
	}
	// Checked on both runtimes. On Spark the runner reads the same variable (its Crash class)
	// and kills at the phases of a run's batches; the hook kills at those of a rebuild's
	// (engine/spark's PhaseHook).
	hook, err := crashHook(os.Getenv(engine.CrashAtEnv))
	if err != nil {
		return withExitCode(exitInvalid, err)
	}
	if obj.Spec.Runtime.Name() == v1.RuntimeSpark {
		return runSpark(ctx, obj, file, location, progress, httpAddr, hook, stdout, stderr)
	}
	if err := refuseSparkCheckpoint(ctx, obj, location); err != nil {
		return withExitCode(exitRefused, err)
	}
	reg, err := newRegistry()
	if err != nil {
		return err
	}
	out, err := newRunOutput(obj, location, progress, httpAddr, stderr, "")
	if err != nil {
		return err
	}
	defer out.stop()
	logger := out.logger
	opts := []engine.Option{
		engine.WithLogger(logger),
		engine.WithObserver(out.observer),
		engine.WithStdout(stdout),
		// The checkpoint refuses an incompatible change here too, as in the
		// pod (defence in depth behind `lockstep plan`).
		engine.WithStartGuard(compatGuard(logger)),
	}
	if location != "" {
		opts = append(opts, engine.WithCheckpoint(location))
	}
	if hook != nil {
		opts = append(opts, engine.WithPhaseHook(hook))
	}
	q, err := engine.New(obj, reg, opts...)
	if ise := (*engine.InvalidSpecError)(nil); errors.As(err, &ise) {
		return withExitCode(exitInvalid, invalidSpec(file, ise))
	}
	if err != nil {
		return err
	}
	return out.run(ctx, q)
}

// runOutput is where `lockstep run` reports, whatever the runtime: progress lines on standard
// error and, with --http, the query's page, progress and metrics.
type runOutput struct {
	printer  *progressPrinter
	observer engine.Observer
	logger   *slog.Logger
	srv      *queryServer // nil without --http
	stop     func()
}

// newRunOutput prints progress to stderr and, when httpAddr is set, serves the query there;
// metricsNote says what else /metrics holds, opts add to its metrics. The caller calls stop.
func newRunOutput(obj *v1.StreamingQuery, location, progress, httpAddr string, stderr io.Writer, metricsNote string, opts ...metrics.Option) (*runOutput, error) {
	out := &runOutput{printer: &progressPrinter{w: stderr, json: progress == progressJSON, name: obj.Namespace + "/" + obj.Name}, stop: func() {}}
	out.observer = out.printer
	var logs slog.Handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})
	if httpAddr != "" {
		out.srv = newQueryServer(obj, location, opts...)
		logs = out.srv.ring.LogHandler(logs)
		mux := http.NewServeMux()
		out.srv.register(mux)
		addr, stop, err := serveHTTP(httpAddr, mux)
		if err != nil {
			return nil, withExitCode(exitInvalid, fmt.Errorf("--http: %w", err))
		}
		out.stop = stop
		out.printer.printf("lockstep: query page on http://%s/ (metrics at /metrics%s)", addr, metricsNote)
		out.observer = append(observers{out.printer}, out.srv.observers()...)
	}
	out.logger = slog.New(logs)
	return out, nil
}

// run runs q to its end, stopping it at a batch boundary on the first signal and at once on
// the second, and returns how it ended with its exit code.
func (o *runOutput) run(ctx context.Context, q engine.Runtime) error {
	defer stopOnSignals(q.Stop, func() {
		o.printer.note("stopping after the current batch (signal again to exit at once)")
	}, func() {
		o.printer.note("exiting at once; the next run replays the interrupted batch")
	})()
	sum, err := q.Run(ctx)
	if o.srv != nil {
		o.srv.ring.Ended(time.Now(), err)
	}
	if err != nil {
		if errors.Is(err, engine.ErrRefused) {
			return withExitCode(exitRefused, err)
		}
		return withExitCode(exitFailure, err)
	}
	o.printer.summary(sum)
	return nil
}

func readQueryFile(file string) (*v1.StreamingQuery, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("read query: %w", err)
	}
	defer f.Close()
	obj, err := v1.ReadQuery(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return obj, nil
}

// invalidSpec lists every field error of the spec, one per line.
func invalidSpec(file string, ise *engine.InvalidSpecError) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s: the query is invalid (%d problems):", file, len(ise.Errs))
	for _, e := range ise.Errs {
		sb.WriteString("\n  " + e.Error())
	}
	return errors.New(sb.String())
}

// crashHook parses LOCKSTEP_CRASH_AT; it returns nil when it is empty.
func crashHook(spec string) (func(engine.Phase, int64), error) {
	if spec == "" {
		return nil, nil
	}
	p, b, ok := strings.Cut(spec, ":")
	batch, err := strconv.ParseInt(b, 10, 64)
	phase := engine.Phase(p)
	known := false
	for _, k := range engine.Phases() {
		known = known || k == phase
	}
	if !ok || err != nil || !known {
		return nil, fmt.Errorf("%s=%q: want <phase>:<batch> with phase one of %v", engine.CrashAtEnv, spec, engine.Phases())
	}
	return func(at engine.Phase, n int64) {
		if at == phase && n == batch {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}, nil
}

// progressPrinter prints the run's start, each batch and the summary, as
// text lines or JSON objects (one per line, with an "event" field).
type progressPrinter struct {
	mu   sync.Mutex
	w    io.Writer
	json bool
	name string
}

var _ engine.Observer = (*progressPrinter)(nil)

func (p *progressPrinter) Started(s engine.Start) {
	if p.json {
		p.emit("start", s)
		return
	}
	p.printf("lockstep: query %s, id %s, checkpoint %s", p.name, s.QueryID, s.Location)
	switch {
	case s.Adopted:
		p.printf("lockstep: adopted the Spark checkpoint, which a Spark job Lockstep did not start wrote; resuming from batch %d with Spark's offsets and state", s.NextBatch)
	case s.New:
		p.printf("lockstep: new checkpoint; starting at batch 0")
	case s.Replay:
		p.printf("lockstep: resuming: replaying batch %d, which the last run planned but did not commit, with its logged offsets", s.NextBatch)
	default:
		p.printf("lockstep: resuming from batch %d (batches up to %d are committed)", s.NextBatch, s.LastCommitted)
	}
	p.printf("lockstep: delivery guarantee: %s", s.Guarantee)
	switch s.Trigger {
	case "once", "availableNow":
		p.printf("lockstep: trigger %s: processes the data available now, then stops", s.Trigger)
	default:
		p.printf("lockstep: trigger %s: runs until stopped (Ctrl-C stops after the current batch)", s.Trigger)
	}
}

func (p *progressPrinter) Committed(pr engine.Progress) {
	if p.json {
		p.emit("progress", pr)
		return
	}
	wm := "-"
	if pr.WatermarkMs != 0 {
		wm = time.UnixMilli(pr.WatermarkMs).UTC().Format(time.RFC3339)
	}
	var extra string
	if pr.NumMalformedRows > 0 {
		extra += fmt.Sprintf(", %d malformed", pr.NumMalformedRows)
	}
	if pr.Replay {
		extra += " (replayed)"
	}
	p.printf("batch %d: %d rows in, %d out, %.0f rows/s, %s, watermark %s%s",
		pr.Batch, pr.NumInputRows, pr.NumOutputRows, pr.ProcessedRowsPerSecond, pr.Duration.Round(time.Millisecond), wm, extra)
}

// Rebuilt prints a batch a rebuild replayed (spec.onIncompatibleChange: rebuild).
func (p *progressPrinter) Rebuilt(done, total int64, pr engine.Progress) {
	if p.json {
		p.emit("rebuild", struct {
			Done  int64           `json:"done"`
			Total int64           `json:"total"`
			Batch engine.Progress `json:"batch"`
		}{done, total, pr})
		return
	}
	p.printf("rebuild: batch %d/%d: %d rows in, state only", done, total, pr.NumInputRows)
}

func (p *progressPrinter) summary(s engine.Summary) {
	if p.json {
		p.emit("summary", s)
		return
	}
	var what string
	switch s.Reason {
	case engine.StopSuspended:
		p.printf("lockstep: the query is suspended (spec.suspend); nothing ran")
		return
	case engine.StopTriggerDone:
		what = "done"
	default:
		what = "stopped"
	}
	last := "none committed yet"
	if s.LastCommitted >= 0 {
		last = fmt.Sprintf("last committed batch %d", s.LastCommitted)
	}
	p.printf("lockstep: %s: %d batches, %d rows in, %d out, %d malformed in %s; %s; run again to resume",
		what, s.Batches, s.NumInputRows, s.NumOutputRows, s.NumMalformedRows, s.Duration.Round(time.Millisecond), last)
}

// note prints a message from the signal handler.
func (p *progressPrinter) note(msg string) {
	if p.json {
		p.emit("note", map[string]string{"message": msg})
		return
	}
	p.printf("lockstep: %s", msg)
}

func (p *progressPrinter) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *progressPrinter) emit(event string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	sep := ","
	if len(b) <= 2 {
		sep = ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "{\"event\":%q%s%s\n", event, sep, b[1:])
}
