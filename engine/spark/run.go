package spark

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/checkpoint/sparkckpt"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/internal/logtail"
	lplan "github.com/lockstep-dev/lockstep/plan"
)

// RecordsDir is the folder, inside a spark query's checkpoint location, that holds
// Lockstep's own records (owner metadata, shape per batch, a commit per batch with its
// progress, the newest-batch hint) in the built-in checkpoint layout. Spark never looks
// there; Spark's own metadata, offsets, commits, sources and state sit beside it.
const RecordsDir = sparkckpt.RecordsDir

// Options configure a spark query's run.
type Options struct {
	// Location is the checkpoint location (a path or s3://); required.
	Location string
	// Runner is where the runner was built (see FindRunner); required.
	Runner Runner
	// LogPath is the file the Spark driver's log goes to. Default: spark-<name>.log in the
	// checkpoint's parent folder for a local location, else in the system's temp folder.
	LogPath string
	// Observer is told of the start and of each committed batch. Default: none.
	Observer engine.Observer
	// Stdout receives the console sink's output. Default os.Stdout.
	Stdout io.Writer
	// Guard judges the spec against the shape the checkpoint recorded, and records the new
	// shape, before Spark starts (as the built-in engine's start guard). Default: none.
	Guard engine.StartGuard
	// Adopt judges the spec against a checkpoint that a Spark job Lockstep did not start
	// wrote at the location, before anything is written there; what it allows, the query
	// takes over (Spark's query id and offsets, Lockstep's records from then on). Default:
	// none, and such a checkpoint is refused.
	Adopt AdoptGuard
	// Logger logs what the run does. Default: discard.
	Logger *slog.Logger
	// OpenOptions open the checkpoint's store (S3 settings). Default: the environment's.
	OpenOptions []checkpoint.OpenOption
	// Master replaces the plan's master (local[cores]): k8s://https://kubernetes.default.svc
	// in a pod the controller runs (docs/spark.md, On Kubernetes). Default: local mode.
	Master string
	// Conf is added to the plan's Spark settings, over Lockstep's and the spec's: what the
	// place the driver runs in decides (Kubernetes, S3A's endpoint). Default: none.
	Conf map[string]string
	// KillAfter is how long a cancelled run waits for the JVM to stop after it was asked to
	// (it finishes the batch in progress) before it kills the JVM's process group. Stop
	// waits without a deadline. Default: DefaultKillAfter.
	KillAfter time.Duration
	// PhaseHook is called when a batch of a rebuild (Rebuild, or Run's rebuild for
	// spec.onIncompatibleChange: rebuild) passes an engine.Phase: PhaseOffsetsWritten once
	// offsets/N of the new generation is written, PhaseCommitted once the runner answered
	// batch N (Spark's commits/N is written) and before Lockstep records it. It is for crash
	// tests, as engine.WithPhaseHook: `lockstep run` kills itself there (LOCKSTEP_CRASH_AT).
	// A run's own batches pass their phases in the runner's JVM, which reads the same
	// variable (spark/runner's Crash class). Default: none.
	PhaseHook func(phase engine.Phase, batch int64)
}

// DefaultKillAfter is Options.KillAfter's default: the built-in engine's pod is given 30 s to
// stop (the pod's grace period) as well.
const DefaultKillAfter = 30 * time.Second

// Query is a StreamingQuery run on Spark by the runner, as a child JVM. Run runs it; Stop,
// from any goroutine, asks it to stop between batches.
type Query struct {
	obj  *v1.StreamingQuery
	spec *v1.StreamingQuerySpec
	// plan is spec's logical plan, built once, which Run compiles.
	plan *lplan.Plan
	opts Options

	stopOnce sync.Once
	stopCh   chan struct{}
	// rebuilt is set once Run rebuilt the state for the spec (spec.onIncompatibleChange).
	rebuilt bool
}

// New validates the query for the spark runtime. An invalid spec, or one Spark cannot run
// with its meaning, is an *engine.InvalidSpecError listing every problem.
func New(obj *v1.StreamingQuery, opts Options) (*Query, error) {
	obj = obj.DeepCopy()
	obj.Default()
	if obj.Spec.Runtime.Spark == nil {
		obj.Spec.Runtime.Spark = &v1.SparkRuntime{}
	}
	lp, errs := lplan.Compile(obj)
	if len(errs) > 0 {
		return nil, &engine.InvalidSpecError{Errs: errs}
	}
	if errs := Check(lp); len(errs) > 0 {
		return nil, &engine.InvalidSpecError{Errs: errs}
	}
	if opts.Location == "" {
		opts.Location = obj.Spec.Checkpoint.Location
	}
	if opts.Location == "" {
		return nil, errors.New("spark: no checkpoint location")
	}
	if !strings.Contains(opts.Location, "://") {
		abs, err := filepath.Abs(opts.Location)
		if err != nil {
			return nil, fmt.Errorf("spark: checkpoint location: %w", err)
		}
		opts.Location = abs
	}
	if opts.Stdout == nil {
		opts.Stdout = os.Stdout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.OpenOptions == nil {
		opts.OpenOptions = []checkpoint.OpenOption{checkpoint.WithS3(s3.Opener())}
	}
	if opts.KillAfter <= 0 {
		opts.KillAfter = DefaultKillAfter
	}
	return &Query{obj: obj, spec: &obj.Spec, plan: lp, opts: opts, stopCh: make(chan struct{})}, nil
}

var _ engine.Runtime = (*Query)(nil)

// Stop asks the query to stop after the batch in progress. It returns at once.
func (q *Query) Stop() { q.stopOnce.Do(func() { close(q.stopCh) }) }

// LogPath returns the file the Spark driver's log goes to.
func (q *Query) LogPath() string {
	if q.opts.LogPath != "" {
		return q.opts.LogPath
	}
	name := "spark-" + q.obj.Name + ".log"
	if !strings.Contains(q.opts.Location, "://") {
		if abs, err := filepath.Abs(q.opts.Location); err == nil {
			return filepath.Join(filepath.Dir(abs), name)
		}
	}
	return filepath.Join(os.TempDir(), name)
}

// Run claims the checkpoint, starts the runner and reports its batches until the query
// ends: a once or availableNow trigger is done, Stop was called, or the runner failed.
// A checkpoint of another query, or another writer's, is an error wrapping engine.ErrRefused.
// A checkpoint that a Spark job Lockstep did not start wrote is taken over when Options.Adopt
// allows it, and refused untouched when it does not (see AdoptGuard).
func (q *Query) Run(ctx context.Context) (engine.Summary, error) {
	start := time.Now()
	sum := engine.Summary{LastCommitted: -1}
	loc := q.opts.Location
	owner := q.owner()
	sparkStore, ck, adopted, err := q.claim(ctx, owner)
	if err != nil {
		return sum, err
	}
	id := ck.Metadata().ID
	sum.QueryID = id
	if err := claimSparkMetadata(ctx, sparkStore, id); err != nil {
		return sum, err
	}
	committed, planned, err := sparkckpt.Newest(ctx, sparkStore)
	if err != nil {
		return sum, err
	}
	sum.LastCommitted = committed
	next := committed + 1
	head, err := ck.Head(ctx)
	if err != nil {
		return sum, fmt.Errorf("read %s/%s: %w", loc, RecordsDir, err)
	}
	if q.opts.Guard != nil {
		err := q.opts.Guard(ctx, engine.GuardRequest{Checkpoint: ck, Spec: q.spec, Head: head, NextBatch: next, Getenv: os.Getenv,
			Retained: func(ctx context.Context, r checkpoint.Replay) error {
				return q.CheckRetained(ctx, sparkStore, r.Batches)
			}})
		if errors.Is(err, engine.ErrRebuildRequired) && !q.rebuilt {
			// spec.onIncompatibleChange: rebuild, and a rebuild answers the change: rebuild the
			// state, then start again on the new generation.
			q.rebuilt = true
			q.opts.Logger.Warn("Rebuilding the state for the new spec from the retained input first", "reason", err)
			ropts := engine.RebuildOptions{Reason: err.Error()}
			if o, ok := q.opts.Observer.(engine.RebuildObserver); ok {
				ropts.Progress = o.Rebuilt
			}
			if _, err := q.Rebuild(ctx, ropts); err != nil {
				return sum, fmt.Errorf("rebuild: %w", err)
			}
			return q.Run(ctx)
		}
		if err != nil {
			return sum, fmt.Errorf("%w: %w", engine.ErrRefused, err)
		}
	}
	if s := head.Sealed; s != nil {
		return sum, fmt.Errorf("%w: %s was sealed at batch %d by a rebuild to its %s, which has not switched yet: run the rebuild again to finish it (lockstep checkpoint rebuild, or the new spec with spec.onIncompatibleChange: rebuild), or delete %s/%s to cancel it",
			engine.ErrRefused, ck.Location(), s.BatchID, s.Conf[checkpoint.ConfSealed], ck.Location(), checkpoint.OffsetsKey(s.BatchID))
	}
	// A Spark job's checkpoint that named no sources stays so: Spark keeps their logs by position.
	unnamed, err := sparkckpt.UnnamedSources(ctx, sparkStore, planned)
	if err != nil {
		return sum, fmt.Errorf("read %s: %w", loc, err)
	}
	statics, joins, err := q.pinStatics(ctx, head, start)
	if err != nil {
		return sum, err
	}
	plan, err := Compile(q.plan, CompileOptions{QueryID: id, CheckpointLocation: sparkckpt.HadoopLocation(generationLocation(loc, ck.Generation())),
		AppName: owner.Namespace + "/" + owner.Name, Getenv: os.Getenv, UnnamedSources: unnamed, Statics: statics})
	if err != nil {
		return sum, err
	}
	if q.opts.Master != "" {
		plan.Master = q.opts.Master
	}
	maps.Copy(plan.Conf, q.opts.Conf)
	commit, err := q.committer(ctx, plan, id)
	if err != nil {
		return sum, err
	}
	if c, ok := commit.(io.Closer); ok {
		defer c.Close()
	}
	if q.opts.Observer != nil {
		q.opts.Observer.Started(engine.Start{
			QueryID: id, Location: loc, Owner: owner, New: committed < 0 && planned < 0, Adopted: adopted != nil && adopted.foreign,
			NextBatch: next, Replay: planned > committed, LastCommitted: committed,
			Trigger: q.spec.Trigger.Name(), Guarantee: engine.GuaranteeOf(q.spec),
			Pinned: map[string]string{"runtime": string(v1.RuntimeSpark), "spark.sql.shuffle.partitions": plan.Conf["spark.sql.shuffle.partitions"]},
		})
	}
	err = q.runRunner(ctx, plan, ck, commit, joins, &sum)
	sum.Duration = time.Since(start)
	sum.DurationMs = sum.Duration.Milliseconds()
	if err != nil {
		return sum, err
	}
	sum.Reason = engine.StopRequested
	if q.spec.Trigger.Once || q.spec.Trigger.AvailableNow {
		select {
		case <-q.stopCh:
		default:
			sum.Reason = engine.StopTriggerDone
		}
	}
	return sum, nil
}

// claim opens the checkpoint's two stores, takes over a Spark job's checkpoint where
// Options.Adopt allows it, and claims Lockstep's records for owner. It returns Spark's store,
// the claimed records, and the adoption (nil when there was nothing to adopt). Another
// owner's checkpoint is an error wrapping engine.ErrRefused.
func (q *Query) claim(ctx context.Context, owner checkpoint.Owner) (checkpoint.Store, *checkpoint.Checkpoint, *adoption, error) {
	loc := q.opts.Location
	records, err := checkpoint.Open(ctx, loc+"/"+RecordsDir, q.opts.OpenOptions...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open %s/%s: %w", loc, RecordsDir, err)
	}
	sparkStore, err := checkpoint.Open(ctx, loc, q.opts.OpenOptions...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open %s: %w", loc, err)
	}
	adopted, err := q.adopt(ctx, records, sparkStore)
	if err != nil {
		return nil, nil, nil, err
	}
	var claimOpts []checkpoint.ClaimOption
	if adopted != nil {
		// The records continue Spark's query: its id is the sinks' idempotence key.
		claimOpts = append(claimOpts, checkpoint.WithQueryID(adopted.spark.Metadata.ID))
	}
	ck, err := checkpoint.Claim(ctx, records, owner, claimOpts...)
	if errors.Is(err, checkpoint.ErrOwnerMismatch) {
		return nil, nil, nil, fmt.Errorf("%w: %w", engine.ErrRefused, err)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if adopted != nil {
		if err := adopted.record(ctx, ck, q.spec, sparkStore); err != nil {
			return nil, nil, nil, err
		}
	}
	// Spark's files of the current generation: the location's root for the first, a
	// rebuild's generation-<n>/ folder after it (rebuild.go).
	return checkpoint.GenerationStore(sparkStore, ck.Generation()), ck, adopted, nil
}

// claimSparkMetadata writes Spark's metadata file with the query id of Lockstep's records
// before Spark starts, so that Spark's query id (the Delta sink's txn appId, the files
// sink's manifest key) is the checkpoint's. An existing file must name the same id.
func claimSparkMetadata(ctx context.Context, s checkpoint.Store, id string) error {
	data, _ := json.Marshal(map[string]string{"id": id})
	err := s.Create(ctx, "metadata", append(data, '\n'))
	if err == nil || !errors.Is(err, checkpoint.ErrExists) {
		return err
	}
	got, err := s.Get(ctx, "metadata")
	if err != nil {
		return fmt.Errorf("read %s/metadata: %w", s.Location(), err)
	}
	var m struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(got, &m); err != nil || m.ID != id {
		return fmt.Errorf("%w: %s/metadata names query %q, but %s/%s names %q", engine.ErrRefused, s.Location(), m.ID, s.Location(), RecordsDir, id)
	}
	return nil
}

// committer is what commits the batches of the plan's sink in Go, nil for a sink Spark commits
// itself: the files sink's manifest (files.go), the rows sinks (rows.go).
func (q *Query) committer(ctx context.Context, plan *Plan, queryID string) (committer, error) {
	logger := q.opts.Logger.With("sink", string(q.spec.Sink.Kind()))
	switch plan.Sink.Kind {
	case SinkFiles:
		return newFilesCommitter(ctx, q.plan, queryID, os.Getenv, logger)
	case SinkRows:
		return newRowsCommitter(ctx, q.plan, queryID, os.Getenv, logger)
	}
	return nil, nil
}

// runRunner starts the runner on plan and follows it to its end, committing the sink's batches
// with commit (nil for a sink Spark commits) and recording joins, the static snapshots the plan
// pins, in each batch's entry.
func (q *Query) runRunner(ctx context.Context, plan *Plan, ck *checkpoint.Checkpoint, commit committer, joins []checkpoint.JoinSnapshot, sum *engine.Summary) error {
	jvm, err := q.launch(ctx, plan)
	if err != nil {
		return err
	}
	defer jvm.cleanup()
	r := &reader{q: q, ck: ck, sum: sum, last: sum.LastCommitted, commit: commit, sink: plan.Sink.Kind, joins: joins, send: jvm.send}
	scanErr := r.read(ctx, jvm.stdout)
	waitErr := jvm.wait()
	if r.err != nil {
		return r.err
	}
	if waitErr != nil {
		msg := r.runnerError
		if msg == "" {
			msg = jvm.ended(waitErr)
		}
		return fmt.Errorf("the Spark query failed: %s (Spark's log: %s)", msg, jvm.logPath)
	}
	return scanErr
}

// runnerJVM is a runner started on a plan (launch).
type runnerJVM struct {
	cmd    *exec.Cmd
	stdout io.Reader
	// send writes a line to the runner's standard input.
	send    func(line []byte) error
	stdin   io.Closer
	done    chan struct{}
	logPath string
	dir     string
	logFile *os.File
	// tail is the end of the driver's log, read for its last error when the runner exits
	// without having said why (ended).
	tail *logtail.Tail
}

// ended says how the runner ended, given its Wait error, when it reported no error itself
// (the JVM died, or Spark ended it): the exit status and the last error of its log.
func (j *runnerJVM) ended(waitErr error) string {
	if e := logtail.LastError(j.tail.String()); e != "" {
		return waitErr.Error() + "; the last error in Spark's log: " + e
	}
	return waitErr.Error()
}

// wait waits for the runner to exit, and ends the goroutine that stops it.
func (j *runnerJVM) wait() error {
	err := j.cmd.Wait()
	close(j.done)
	_ = j.stdin.Close()
	return err
}

func (j *runnerJVM) cleanup() {
	j.logFile.Close()
	os.RemoveAll(j.dir)
}

// launch writes plan to a temporary folder and starts the runner on it, its driver's log
// appended to LogPath; Stop or ctx's end stops it (stopRunner). The caller reads its
// standard output to the end, then waits and cleans up.
func (q *Query) launch(ctx context.Context, plan *Plan) (*runnerJVM, error) {
	dir, err := os.MkdirTemp("", "lockstep-spark-")
	if err != nil {
		return nil, fmt.Errorf("spark plan: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	planPath := filepath.Join(dir, "plan.json")
	// Spark's SQL warehouse (unused: tables are named by path) would land in the working folder.
	plan.Conf["spark.sql.warehouse.dir"] = filepath.Join(dir, "warehouse")
	data, err := json.MarshalIndent(plan, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode spark plan: %w", err)
	}
	if err := os.WriteFile(planPath, data, 0o600); err != nil {
		return nil, fmt.Errorf("write spark plan: %w", err)
	}
	logPath := q.LogPath()
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, fmt.Errorf("open the Spark log: %w", err)
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the Spark log: %w", err)
	}
	defer func() {
		if !ok {
			logFile.Close()
		}
	}()
	mem := q.spec.Runtime.Spark.Driver.MemoryOrDefault()
	jvmOpts, err := writeTrustStore(dir, os.Getenv)
	if err != nil {
		return nil, err
	}
	// The JVM's temporary files (Spark's block manager and artifact folders, the native
	// libraries snappy and lz4 unpack) in the launch's folder, which cleanup removes: in the
	// shared temporary folder each run left ~5 MB behind. The query's own options come after.
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("spark temporary folder: %w", err)
	}
	jvmOpts = append(jvmOpts, "-Djava.io.tmpdir="+tmp)
	jvmOpts = append(jvmOpts, v1.JavaOptions(q.spec.Runtime.Spark.Conf[v1.SparkDriverJavaOptions])...)
	cmd := q.opts.Runner.Command(planPath, mem.Value(), jvmOpts...)
	tail := &logtail.Tail{}
	cmd.Stderr = io.MultiWriter(logFile, tail)
	// A child the JVM started and left running holds the log's pipe: Wait waits for it no longer.
	cmd.WaitDelay = 10 * time.Second
	cmd.Env = append(os.Environ(), "SPARK_LOCAL_IP=127.0.0.1")
	cmd.Env = append(cmd.Env, runnerSecrets(q.spec, os.Getenv)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	q.opts.Logger.Info("Starting the Spark runner", "log", logPath, "plan", planPath)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the Spark runner: %w", err)
	}
	// The runner's standard input carries "stop" and the replies to its requests, whole lines.
	var stdinMu sync.Mutex
	send := func(line []byte) error {
		stdinMu.Lock()
		defer stdinMu.Unlock()
		_, err := stdin.Write(line)
		return err
	}
	j := &runnerJVM{cmd: cmd, stdout: stdout, send: send, stdin: stdin, done: make(chan struct{}), logPath: logPath, dir: dir, logFile: logFile, tail: tail}
	go q.stopRunner(ctx, cmd, send, j.done)
	ok = true
	return j, nil
}

// stopRunner asks the runner to stop (a line on its standard input) when Stop is called or ctx
// is cancelled, until done closes. Cancelled, it kills the runner's process group (the JVM and
// what it started) if it has not exited within KillAfter: a batch cut short is replayed from
// the offsets log at the next start, so killing loses nothing.
func (q *Query) stopRunner(ctx context.Context, cmd *exec.Cmd, send func([]byte) error, done <-chan struct{}) {
	select {
	case <-q.stopCh:
		_ = send([]byte("stop\n"))
		return
	case <-ctx.Done():
	case <-done:
		return
	}
	_ = send([]byte("stop\n"))
	t := time.NewTimer(q.opts.KillAfter)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		q.opts.Logger.Warn("The Spark runner did not stop in time: killing it", "after", q.opts.KillAfter)
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// reader reads the runner's standard output: progress lines become engine.Progress and
// commits in Lockstep's records; other lines are the console sink's, passed through.
type reader struct {
	q           *Query
	ck          *checkpoint.Checkpoint
	sum         *engine.Summary
	last        int64
	runnerError string
	err         error
	// joins are the static snapshots each batch joins (pinStatics), which its entry records.
	joins []checkpoint.JoinSnapshot
	// sinkRows holds the rows the sink's committer committed per batch (Spark reports none for
	// foreachBatch).
	sinkRows map[int64]int64
	// commit commits the sink's batches, whose plan kind is sink; nil for a sink Spark
	// commits itself.
	commit committer
	sink   string
	// send writes a line to the runner's standard input.
	send func(line []byte) error
}

const (
	linePrefix     = "@@lockstep-"
	progressPrefix = "@@lockstep-progress "
	errorPrefix    = "@@lockstep-error "
)

func (r *reader) read(ctx context.Context, out io.Reader) error {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, progressPrefix):
			if r.err == nil {
				r.err = r.progress(ctx, []byte(strings.TrimPrefix(line, progressPrefix)))
				if r.err != nil {
					r.q.Stop()
				}
			}
		case strings.HasPrefix(line, requestPrefix):
			r.request(ctx, strings.TrimPrefix(line, requestPrefix))
		case strings.HasPrefix(line, errorPrefix):
			var e struct {
				Message string `json:"message"`
			}
			_ = json.Unmarshal([]byte(strings.TrimPrefix(line, errorPrefix)), &e)
			r.runnerError = e.Message
		case strings.HasPrefix(line, linePrefix):
		default:
			fmt.Fprintln(r.q.opts.Stdout, line)
		}
	}
	return sc.Err()
}

// request answers a request of the runner, which waits for the answer. A failed request fails
// the run (and the runner's batch, which the reply tells).
func (r *reader) request(ctx context.Context, line string) {
	req, err := parseRequest(line)
	rep := reply{BatchID: req.BatchID}
	switch {
	case err != nil:
	case req.Sink != r.sink || r.commit == nil:
		err = fmt.Errorf("the runner asked the %q sink, which the query does not have", req.Sink)
	default:
		var rows int64
		rep, rows, err = r.commit.serve(ctx, req)
		if err == nil && rep.Committed {
			if r.sinkRows == nil {
				r.sinkRows = map[int64]int64{}
			}
			r.sinkRows[req.BatchID] = rows
		}
	}
	if err != nil {
		rep.Error = err.Error()
		if r.err == nil {
			r.err = err
		}
	}
	data, _ := json.Marshal(rep)
	if err := r.send(append(data, '\n')); err != nil && r.err == nil {
		r.err = fmt.Errorf("answer the runner: %w", err)
	}
}

// sparkProgress is the part of Spark's StreamingQueryProgress JSON that Lockstep reads.
type sparkProgress struct {
	ID                     string            `json:"id"`
	Timestamp              time.Time         `json:"timestamp"`
	BatchID                int64             `json:"batchId"`
	BatchDuration          int64             `json:"batchDuration"`
	NumInputRows           int64             `json:"numInputRows"`
	ProcessedRowsPerSecond float64           `json:"processedRowsPerSecond"`
	DurationMs             map[string]int64  `json:"durationMs"`
	EventTime              map[string]string `json:"eventTime"`
	StateOperators         []struct {
		OperatorName              string `json:"operatorName"`
		NumRowsTotal              int64  `json:"numRowsTotal"`
		NumRowsUpdated            int64  `json:"numRowsUpdated"`
		NumRowsRemoved            int64  `json:"numRowsRemoved"`
		NumRowsDroppedByWatermark int64  `json:"numRowsDroppedByWatermark"`
		MemoryUsedBytes           int64  `json:"memoryUsedBytes"`
		CommitTimeMs              int64  `json:"commitTimeMs"`
	} `json:"stateOperators"`
	Sources []struct {
		Description  string          `json:"description"`
		StartOffset  json.RawMessage `json:"startOffset"`
		EndOffset    json.RawMessage `json:"endOffset"`
		LatestOffset json.RawMessage `json:"latestOffset"`
		NumInputRows int64           `json:"numInputRows"`
	} `json:"sources"`
	Sink struct {
		NumOutputRows int64 `json:"numOutputRows"`
	} `json:"sink"`
}

// progress turns one Spark progress line into a commit in Lockstep's records and an
// engine.Progress. A trigger that ran no batch (no addBatch phase) or a batch already
// reported is skipped.
func (r *reader) progress(ctx context.Context, line []byte) error {
	var sp sparkProgress
	if err := json.Unmarshal(line, &sp); err != nil {
		return fmt.Errorf("read Spark's progress: %w", err)
	}
	if _, ran := sp.DurationMs["addBatch"]; !ran || sp.BatchID <= r.last {
		// A trigger that found no new data is progress too: a liveness probe must not
		// restart a query whose sources are quiet.
		if io, ok := r.q.opts.Observer.(engine.IdleObserver); ok && !ran {
			io.Idle(time.Now())
		}
		return nil
	}
	r.last = sp.BatchID
	p, err := r.record(ctx, sp)
	if err != nil {
		return err
	}
	r.sum.Batches++
	r.sum.NumInputRows += p.NumInputRows
	r.sum.NumOutputRows += p.NumOutputRows
	r.sum.LastCommitted = sp.BatchID
	if o := r.q.opts.Observer; o != nil {
		o.Committed(p)
	}
	return nil
}

// record writes batch sp into Lockstep's records, after Spark committed it: its offsets (the
// sources' end offsets in Spark's JSON), then its commit, so describe and status read them.
func (r *reader) record(ctx context.Context, sp sparkProgress) (engine.Progress, error) {
	p := r.engineProgress(sp)
	off := checkpoint.Offsets{BatchID: sp.BatchID, BatchWatermarkMs: p.WatermarkMs, BatchTimestampMs: sp.Timestamp.UnixMilli(),
		Conf: map[string]string{"runtime": string(v1.RuntimeSpark)}, Joins: r.joins}
	for _, s := range p.Sources {
		o := s.EndOffset
		if o == nil {
			o = json.RawMessage("null")
		}
		off.Sources = append(off.Sources, checkpoint.SourceOffset{Source: s.Name, Offset: o})
	}
	if err := r.ck.AddOffsets(ctx, off); err != nil && !errors.Is(err, checkpoint.ErrFenced) {
		return p, fmt.Errorf("record batch %d in %s: %w", sp.BatchID, RecordsDir, err)
	} else if err != nil {
		return p, fmt.Errorf("%w: %w", engine.ErrOwnedByAnotherWriter, err)
	}
	cm := checkpoint.Commit{BatchID: sp.BatchID, NextBatchWatermarkMs: p.WatermarkMs, Progress: checkpoint.Progress{
		Timestamp: sp.Timestamp, NumInputRows: p.NumInputRows, NumOutputRows: p.NumOutputRows, DurationMs: sp.DurationMs,
	}}
	// The sources' progress, with Kafka's lag, is what the status shows per source.
	for _, s := range p.Sources {
		cm.Progress.Sources = append(cm.Progress.Sources, checkpoint.SourceProgress{Source: s.Name, StartOffset: s.StartOffset,
			EndOffset: s.EndOffset, LatestOffset: s.LatestOffset, NumInputRows: s.NumInputRows, Lag: s.Lag})
	}
	if err := r.ck.AddCommit(ctx, cm); err != nil && !errors.Is(err, checkpoint.ErrFenced) {
		return p, fmt.Errorf("record batch %d in %s: %w", sp.BatchID, RecordsDir, err)
	} else if err != nil {
		return p, fmt.Errorf("%w: %w", engine.ErrOwnedByAnotherWriter, err)
	}
	return p, nil
}

// engineProgress is the engine.Progress of Spark's progress sp: its counts, with the rows the
// runner counted it wrote, its watermark, its state operators and its sources under their
// names in the spec.
func (r *reader) engineProgress(sp sparkProgress) engine.Progress {
	p := engine.Progress{
		QueryID:                r.ck.Metadata().ID,
		Batch:                  sp.BatchID,
		Timestamp:              sp.Timestamp,
		NumInputRows:           sp.NumInputRows,
		NumOutputRows:          max(sp.Sink.NumOutputRows, 0),
		Duration:               time.Duration(sp.DurationMs[checkpoint.DurationTotal]) * time.Millisecond,
		DurationMs:             sp.DurationMs,
		ProcessedRowsPerSecond: sp.ProcessedRowsPerSecond,
	}
	if n, ok := r.sinkRows[sp.BatchID]; ok { // the runner counted what it wrote
		p.NumOutputRows = n
		delete(r.sinkRows, sp.BatchID)
	}
	if wm, ok := sp.EventTime["watermark"]; ok {
		if t, err := time.Parse(time.RFC3339Nano, wm); err == nil {
			p.WatermarkMs = t.UnixMilli()
		}
	}
	// Spark's state operators, for the state metrics; Spark names them by kind, numbered
	// in the order of the plan when there are several.
	for i, op := range sp.StateOperators {
		name := op.OperatorName
		if len(sp.StateOperators) > 1 {
			name = fmt.Sprintf("%s-%d", op.OperatorName, i)
		}
		p.StateOperators = append(p.StateOperators, engine.StateOperatorProgress{Operator: name, Kind: op.OperatorName,
			Version: sp.BatchID + 1, NumRowsTotal: op.NumRowsTotal, NumRowsUpdated: op.NumRowsUpdated, NumRowsRemoved: op.NumRowsRemoved,
			NumRowsDroppedByWatermark: op.NumRowsDroppedByWatermark, MemoryUsedBytes: op.MemoryUsedBytes, CommitTimeMs: op.CommitTimeMs})
	}
	for i, s := range sp.Sources {
		name := s.Description
		if i < len(r.q.spec.Sources) {
			name = r.q.spec.Sources[i].Name
		}
		src := engine.SourceProgress{Name: name, StartOffset: nullable(s.StartOffset), EndOffset: nullable(s.EndOffset), LatestOffset: nullable(s.LatestOffset), NumInputRows: s.NumInputRows}
		if lag, ok := kafkaLag(s.EndOffset, s.LatestOffset); ok {
			src.Lag = &lag
		}
		p.Sources = append(p.Sources, src)
	}
	return p
}

func nullable(m json.RawMessage) json.RawMessage {
	if len(m) == 0 || string(m) == "null" {
		return nil
	}
	return m
}

// kafkaLag sums latest minus end over the partitions of Kafka offsets ({"topic":{"0":12}}).
func kafkaLag(end, latest json.RawMessage) (int64, bool) {
	var e, l map[string]map[string]int64
	if json.Unmarshal(end, &e) != nil || json.Unmarshal(latest, &l) != nil || len(l) == 0 {
		return 0, false
	}
	var lag int64
	topics := make([]string, 0, len(l))
	for t := range l {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		for part, off := range l[t] {
			if d := off - e[t][part]; d > 0 {
				lag += d
			}
		}
	}
	return lag, true
}
