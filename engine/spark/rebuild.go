package spark

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/sparkckpt"
	"github.com/lockstep-dev/lockstep/engine"
)

// A rebuild on Spark (docs/rebuild.md, On Spark). The generations of a spark query's
// checkpoint are those of its records (RecordsDir): <location>/_lockstep/_generations/<n>
// switches, and generation n's records are <location>/_lockstep/generation-<n>/, so that the
// controller, `lockstep plan` and `lockstep checkpoint describe` follow a spark query's
// generations as a built-in one's. Spark's own files of generation n are
// <location>/generation-<n>/: a Spark checkpoint of its own, with the same query id in its
// metadata (the Delta sink's txn appId, the files sink's manifest key).
//
// The new query replays the batches in one runner JVM, one at a time, on a fact of Spark's
// restart (MicroBatchExecution.populateStartOffsets): the newest offsets entry without a
// commit is run again, exactly with its offsets, its batchWatermarkMs and batchTimestampMs,
// its pinned settings overriding the session's; with Trigger.Once that batch alone runs. So
// Go writes offsets/<i> of the new generation (the old entry, with the watermark the new
// query's commits/<i-1> recorded and the new query's pinned settings, among them
// spark.sql.shuffle.partitions: the one way to re-shard a Spark query's state), asks the
// runner ("batch <i>") to start the new query on a noop sink, and reads commits/<i> once it
// says it is done.
//
// A rebuild's kill points (Options.PhaseHook, LOCKSTEP_CRASH_AT) are the Go side's, not the
// runner's: PhaseOffsetsWritten once offsets/<i> is written, before the runner is asked;
// PhaseCommitted once the runner answered (commits/<i> written), before the record. At both
// the runner is idle between batches, so `lockstep run` is the process whose death matters:
// the runner, its standard input ended, stops without writing. A rebuild's runner has no
// kill point of its own: the runner's (its Crash class) are in the sinks and the progress
// listener of a run, and a rebuild runs the noop sink with no listener.

// generationLocation is where Spark's files of generation g are: the location for the first,
// its generation-<n> folder after it.
func generationLocation(loc string, g checkpoint.Generation) string {
	if g.Number == 0 {
		return loc
	}
	return strings.TrimSuffix(loc, "/") + "/" + strings.TrimSuffix(g.Dir(), "/")
}

// rebuildStores opens the records' root (where the generations are) and Spark's root.
func (q *Query) rebuildStores(ctx context.Context) (records, sparkRoot checkpoint.Store, err error) {
	loc := q.opts.Location
	records, err = checkpoint.Open(ctx, loc+"/"+RecordsDir, q.opts.OpenOptions...)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s/%s: %w", loc, RecordsDir, err)
	}
	sparkRoot, err = checkpoint.Open(ctx, loc, q.opts.OpenOptions...)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", loc, err)
	}
	return records, sparkRoot, nil
}

// PlanRebuild reads the current generation of the query's checkpoint and says what Rebuild
// would replay, or why it cannot (an error wrapping engine.ErrRebuildImpossible). It writes
// nothing.
func (q *Query) PlanRebuild(ctx context.Context) (engine.RebuildPlan, error) {
	records, sparkRoot, err := q.rebuildStores(ctx)
	if err != nil {
		return engine.RebuildPlan{}, err
	}
	old, err := checkpoint.Load(ctx, records)
	if err != nil {
		return engine.RebuildPlan{}, fmt.Errorf("plan rebuild: %w", err)
	}
	p, err := engine.PlanRebuildFrom(ctx, old)
	if err != nil && !errors.Is(err, checkpoint.ErrNotReplayable) {
		return p, err // records that lack batches: Spark's log answers for them (amendPlan)
	}
	oldSpark := checkpoint.GenerationStore(sparkRoot, old.Generation())
	log, err := amendPlan(ctx, oldSpark, &p)
	if err != nil {
		return p, err
	}
	return p, q.checkRetained(ctx, oldSpark, log, p.Batches)
}

// amendPlan sets what Spark's own logs say: the batches Spark committed (the records may
// lag by the one whose record a crash cut short) and the one it planned and did not commit.
// Spark's offsets log must still hold batch 0. The replay reads the boundaries from it, not
// from the records (engine.Rebuilder.OwnLog): those of a Spark checkpoint Lockstep adopted
// start at the batch it adopted, the batches before are in Spark's log only. It returns the
// log it read, which the sources' check reads the batches' offsets from (checkRetained).
func amendPlan(ctx context.Context, oldSpark checkpoint.Store, p *engine.RebuildPlan) ([]sparkckpt.Batch, error) {
	batches, err := sparkckpt.Batches(ctx, oldSpark)
	if err != nil {
		return nil, fmt.Errorf("plan rebuild: read %s: %w", oldSpark.Location(), err)
	}
	committed, planned := int64(-1), int64(-1)
	first := int64(-1)
	for _, b := range batches {
		if b.Offsets == nil {
			continue
		}
		if first < 0 {
			first = b.ID
		}
		planned = b.ID
		if b.Commit != nil {
			committed = b.ID
		}
	}
	if first != 0 {
		if first < 0 {
			return nil, fmt.Errorf("%w: %w: Spark's offsets log in %s holds no batch", engine.ErrRebuildImpossible, checkpoint.ErrNotReplayable, oldSpark.Location())
		}
		purged := "batch 0"
		if first > 1 {
			purged = fmt.Sprintf("batches 0–%d", first-1)
		}
		return nil, fmt.Errorf("%w: %w: Spark purged the offsets of %s: its offsets log in %s keeps batches %d–%d only (spark.sql.streaming.minBatchesToRetain), so what %s read is no longer recorded",
			engine.ErrRebuildImpossible, checkpoint.ErrNotReplayable, purged, oldSpark.Location(), first, planned, purged)
	}
	p.Batches = max(p.Batches, committed+1)
	p.Pending = -1
	if planned > committed {
		p.Pending = planned
	}
	return batches, nil
}

// Rebuild computes the state this query would have after the checkpoint's newest committed
// batch had it run from the start, on Spark, and switches the checkpoint to it, as the
// built-in engine's Query.Rebuild does (engine.Rebuilder: the same plan, seal and switch).
// The current generation, Spark's files and Lockstep's records, is untouched until the
// switch; a crash leaves a partial new generation that a retried Rebuild of the same spec
// continues.
func (q *Query) Rebuild(ctx context.Context, opts engine.RebuildOptions) (engine.RebuildSummary, error) {
	records, sparkRoot, err := q.rebuildStores(ctx)
	if err != nil {
		return engine.RebuildSummary{}, err
	}
	fp, err := engine.SpecFingerprint(q.spec)
	if err != nil {
		return engine.RebuildSummary{}, err
	}
	var (
		nextGen checkpoint.Generation // the generation being rebuilt
		next    checkpoint.Store      // its Spark files
	)
	b := engine.Rebuilder{Root: records, Owner: q.owner(), Fingerprint: fp, Now: time.Now, OwnLog: true,
		Plan: func(ctx context.Context, old *checkpoint.Checkpoint, p *engine.RebuildPlan) error {
			nextGen = checkpoint.Generation{Number: p.To}
			next = checkpoint.GenerationStore(sparkRoot, nextGen)
			oldSpark := checkpoint.GenerationStore(sparkRoot, old.Generation())
			log, err := amendPlan(ctx, oldSpark, p)
			if err != nil {
				return err
			}
			return q.checkBeforeReplay(ctx, oldSpark, log, p.Batches)
		},
		Clear: func(ctx context.Context) error {
			if dir, ok := localPath(generationLocation(q.opts.Location, nextGen)); ok {
				// Hadoop's hidden checksum files too (.<name>.crc, which no listing shows): one
				// left beside a file written again would fail Spark's read of it.
				if err := os.RemoveAll(dir); err != nil {
					return fmt.Errorf("clear %s: %w", dir, err)
				}
				return nil
			}
			keys, err := checkpoint.ListKeys(ctx, next, "")
			if err != nil {
				return fmt.Errorf("clear %s: %w", next.Location(), err)
			}
			for _, k := range keys {
				if err := next.Delete(ctx, k); err != nil {
					return fmt.Errorf("clear %s: %w", next.Location(), err)
				}
			}
			return nil
		},
		Replay: func(ctx context.Context, old, gen *checkpoint.Checkpoint, p engine.RebuildPlan) (int64, int64, error) {
			rp := &replayer{q: q, old: old, gen: gen, plan: p, progress: opts.Progress,
				oldSpark: checkpoint.GenerationStore(sparkRoot, old.Generation()), newSpark: next,
				newLocation: generationLocation(q.opts.Location, nextGen)}
			return rp.replay(ctx)
		}}
	return b.Rebuild(ctx, opts)
}

// localPath is the folder of a local location: a path, or file://.
func localPath(loc string) (string, bool) {
	if p, ok := strings.CutPrefix(loc, "file://"); ok {
		return p, true
	}
	return loc, !strings.Contains(loc, "://")
}

func (q *Query) owner() checkpoint.Owner {
	return checkpoint.Owner{Namespace: q.obj.Namespace, Name: q.obj.Name, UID: string(q.obj.UID)}
}

// replayer replays old's batches into the new generation on Spark.
type replayer struct {
	q                  *Query
	old, gen           *checkpoint.Checkpoint
	plan               engine.RebuildPlan
	progress           func(done, total int64, p engine.Progress)
	oldSpark, newSpark checkpoint.Store
	newLocation        string
	// conf holds the new query's settings that Spark pins in the offsets log.
	conf map[string]string
	// joins are the static snapshots the replay joins, which each entry records.
	joins []checkpoint.JoinSnapshot

	jvm *runnerJVM
	out *bufio.Scanner
	ran int64
	// rows counts the input rows of the batches run.
	rows int64
}

// replay runs every committed batch of old the new generation has not committed, and carries
// old's pending batch over unrun. It returns the batches it ran and their input rows.
func (rp *replayer) replay(ctx context.Context) (int64, int64, error) {
	id := rp.old.Metadata().ID
	if err := claimSparkMetadata(ctx, rp.newSpark, id); err != nil {
		return 0, 0, err
	}
	// The sources' own logs (the file source's list of files per batch, Kafka's initial
	// offsets): Spark reads them to resolve the recorded offsets.
	if err := checkpoint.CopyPrefix(ctx, rp.oldSpark, rp.newSpark, "sources/", hadoopChecksum); err != nil {
		return 0, 0, fmt.Errorf("rebuild: copy the sources' logs: %w", err)
	}
	unnamed, err := sparkckpt.UnnamedSources(ctx, rp.oldSpark, max(rp.plan.Batches-1, rp.plan.Pending))
	if err != nil {
		return 0, 0, fmt.Errorf("read %s: %w", rp.oldSpark.Location(), err)
	}
	// The static sides the batches joined: the snapshots the old generation pinned (a run pins
	// them once and keeps them across restarts), which the new generation's entries record too,
	// so that the run after the switch joins the same rows.
	oldHead, err := rp.old.Head(ctx)
	if err != nil {
		return 0, 0, err
	}
	statics, joins, err := rp.q.pinStatics(ctx, oldHead, time.Now())
	if err != nil {
		return 0, 0, err
	}
	rp.joins = joins
	plan, err := Compile(rp.q.plan, CompileOptions{QueryID: id, CheckpointLocation: sparkckpt.HadoopLocation(rp.newLocation),
		AppName: rp.q.obj.Namespace + "/" + rp.q.obj.Name, Getenv: os.Getenv, UnnamedSources: unnamed, Statics: statics})
	if err != nil {
		return 0, 0, err
	}
	if rp.q.opts.Master != "" {
		plan.Master = rp.q.opts.Master
	}
	maps.Copy(plan.Conf, rp.q.opts.Conf)
	rp.conf = plan.Conf
	plan.Rebuild = true
	plan.Trigger = Trigger{Kind: "once"}
	plan.Sink = Sink{Kind: SinkNoop, Options: map[string]string{}}
	defer func() { _ = rp.stop() }()

	committed, planned, err := sparkckpt.Newest(ctx, rp.newSpark)
	if err != nil {
		return rp.ran, rp.rows, err
	}
	if err := rp.mirror(ctx, committed); err != nil {
		return rp.ran, rp.rows, err
	}
	if g := rp.q.opts.Guard; g != nil {
		// As a start on the new generation: it records the new query's shape from its first batch.
		head, err := rp.gen.Head(ctx)
		if err != nil {
			return rp.ran, rp.rows, err
		}
		if err := g(ctx, engine.GuardRequest{Checkpoint: rp.gen, Spec: rp.q.spec, Head: head, NextBatch: committed + 1, Getenv: os.Getenv}); err != nil {
			return rp.ran, rp.rows, fmt.Errorf("%w: %w", engine.ErrRefused, err)
		}
	}
	for i := committed + 1; i < rp.plan.Batches || i == rp.plan.Pending; i++ {
		if i > planned {
			if err := rp.writeOffsets(ctx, i); err != nil {
				return rp.ran, rp.rows, err
			}
			rp.reached(engine.PhaseOffsetsWritten, i)
		}
		if i == rp.plan.Pending && i >= rp.plan.Batches {
			return rp.ran, rp.rows, nil // the next run's first batch
		}
		if err := rp.run(ctx, plan, i); err != nil {
			return rp.ran, rp.rows, err
		}
	}
	return rp.ran, rp.rows, nil
}

// writeOffsets writes offsets/<i> of the new generation: old's entry, with the watermark the
// new query computed after batch i-1 and the new query's pinned settings.
func (rp *replayer) writeOffsets(ctx context.Context, i int64) error {
	key := "offsets/" + strconv.FormatInt(i, 10)
	data, err := rp.oldSpark.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("rebuild batch %d: read %s/%s: %w", i, rp.oldSpark.Location(), key, err)
	}
	var watermark int64
	if i > 0 {
		c, err := rp.newCommit(ctx, i-1)
		if err != nil {
			return err
		}
		watermark = c.NextBatchWatermarkMs
	}
	data, err = rewriteOffsets(data, watermark, rp.conf)
	if err != nil {
		return fmt.Errorf("rebuild batch %d: %s/%s: %w", i, rp.oldSpark.Location(), key, err)
	}
	if err := rp.newSpark.Put(ctx, key, data); err != nil {
		return fmt.Errorf("rebuild batch %d: %w", i, err)
	}
	return nil
}

// rewriteOffsets is a Spark offsets entry (a version line, the batch's metadata, one line per
// source) with the metadata's batchWatermarkMs set and each pinned setting that conf has
// taken from conf; every other byte is kept.
func rewriteOffsets(data []byte, watermarkMs int64, conf map[string]string) ([]byte, error) {
	lines := bytes.SplitN(data, []byte("\n"), 3)
	if len(lines) < 2 {
		return nil, errors.New("not an offsets entry: no batch metadata line")
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(lines[1], &meta); err != nil {
		return nil, fmt.Errorf("batch metadata: %w", err)
	}
	var pinned map[string]string
	if raw, ok := meta["conf"]; ok {
		if err := json.Unmarshal(raw, &pinned); err != nil {
			return nil, fmt.Errorf("batch metadata conf: %w", err)
		}
	}
	for k := range pinned {
		if v, ok := conf[k]; ok {
			pinned[k] = v
		}
	}
	var err error
	if meta["conf"], err = json.Marshal(pinned); err != nil {
		return nil, err
	}
	meta["batchWatermarkMs"] = json.RawMessage(strconv.FormatInt(watermarkMs, 10))
	line, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	out := append(append(append([]byte{}, lines[0]...), '\n'), line...)
	if len(lines) == 3 {
		out = append(append(out, '\n'), lines[2]...)
	}
	return out, nil
}

func (rp *replayer) newCommit(ctx context.Context, i int64) (sparkckpt.Commit, error) {
	key := "commits/" + strconv.FormatInt(i, 10)
	data, err := rp.newSpark.Get(ctx, key)
	if err != nil {
		return sparkckpt.Commit{}, fmt.Errorf("rebuild batch %d: read %s/%s: %w", i, rp.newSpark.Location(), key, err)
	}
	return sparkckpt.ParseCommit(key, i, data)
}

// run has the runner run batch i, whose offsets entry is written, and records it.
func (rp *replayer) run(ctx context.Context, plan *Plan, i int64) error {
	if rp.jvm == nil {
		jvm, err := rp.q.launch(ctx, plan)
		if err != nil {
			return err
		}
		rp.jvm = jvm
		rp.out = bufio.NewScanner(jvm.stdout)
		rp.out.Buffer(make([]byte, 64<<10), 16<<20)
	}
	if err := rp.jvm.send([]byte(fmt.Sprintf("batch %d\n", i))); err != nil {
		return rp.failed(fmt.Errorf("rebuild batch %d: ask the runner: %w", i, err))
	}
	var sp sparkProgress
	for {
		if !rp.out.Scan() {
			return rp.failed(fmt.Errorf("rebuild batch %d: %w", i, errRunnerEnded))
		}
		line := rp.out.Text()
		if strings.HasPrefix(line, errorPrefix) {
			var e struct {
				Message string `json:"message"`
			}
			_ = json.Unmarshal([]byte(strings.TrimPrefix(line, errorPrefix)), &e)
			return rp.failed(fmt.Errorf("rebuild batch %d: %s", i, e.Message))
		}
		if strings.HasPrefix(line, rebuiltPrefix) {
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, rebuiltPrefix)), &sp); err != nil {
				return fmt.Errorf("rebuild batch %d: read the runner's answer: %w", i, err)
			}
			break
		}
	}
	if sp.BatchID != i {
		return fmt.Errorf("rebuild batch %d: Spark ran batch %d (the offsets log of %s is not as the rebuild wrote it)", i, sp.BatchID, rp.newSpark.Location())
	}
	if _, err := rp.newCommit(ctx, i); err != nil {
		return err
	}
	rp.reached(engine.PhaseCommitted, i)
	r := &reader{q: rp.q, ck: rp.gen, joins: rp.joins}
	p, err := r.record(ctx, sp)
	if err != nil {
		return err
	}
	rp.ran++
	rp.rows += p.NumInputRows
	if rp.progress != nil {
		rp.progress(i+1, rp.plan.Batches, p)
	}
	return nil
}

// reached calls the query's PhaseHook, if any, for batch i of the rebuild.
func (rp *replayer) reached(p engine.Phase, i int64) {
	if h := rp.q.opts.PhaseHook; h != nil {
		h(p, i)
	}
}

// mirror records in the new generation's records the batches up to committed that Spark
// committed there and a crash kept out of them.
func (rp *replayer) mirror(ctx context.Context, committed int64) error {
	h, err := rp.gen.Head(ctx)
	if err != nil {
		return err
	}
	from := int64(0)
	if h.Committed != nil {
		from = h.Committed.BatchID + 1
	}
	r := &reader{q: rp.q, ck: rp.gen, joins: rp.joins}
	for i := from; i <= committed; i++ {
		key := "offsets/" + strconv.FormatInt(i, 10)
		data, err := rp.newSpark.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("rebuild: read %s/%s: %w", rp.newSpark.Location(), key, err)
		}
		o, err := sparkckpt.ParseOffsets(key, i, data)
		if err != nil {
			return fmt.Errorf("rebuild: read %s/offsets/%d: %w", rp.newSpark.Location(), i, err)
		}
		sp := sparkProgress{BatchID: i, Timestamp: time.UnixMilli(o.TimestampMs).UTC()}
		if _, err := r.record(ctx, sp); err != nil {
			return err
		}
	}
	return nil
}

// failed stops the runner and returns err, with the runner's log named.
func (rp *replayer) failed(err error) error {
	if rp.jvm == nil {
		return err
	}
	jvm := rp.jvm
	if waitErr := rp.stop(); errors.Is(err, errRunnerEnded) && waitErr != nil {
		err = fmt.Errorf("%w: %s", err, jvm.ended(waitErr))
	}
	return fmt.Errorf("%w (Spark's log: %s)", err, jvm.logPath)
}

// errRunnerEnded is a replay's runner that ended before it answered.
var errRunnerEnded = errors.New("the runner ended")

// stop ends the runner: its input closes, and it exits. It returns how it exited.
func (rp *replayer) stop() error {
	if rp.jvm == nil {
		return nil
	}
	_ = rp.jvm.send([]byte("stop\n"))
	_ = rp.jvm.stdin.Close()
	for rp.out.Scan() {
	}
	err := rp.jvm.wait()
	rp.jvm.cleanup()
	rp.jvm = nil
	return err
}

// rebuiltPrefix starts the runner's line saying a rebuild batch is done: Spark's progress of it.
const rebuiltPrefix = "@@lockstep-rebuilt "

// hadoopChecksum reports whether key is one of Hadoop's hidden checksum files (.<name>.crc),
// which a copy of Spark's files does not need.
func hadoopChecksum(key string) bool {
	base := key[strings.LastIndex(key, "/")+1:]
	return strings.HasPrefix(base, ".") && strings.HasSuffix(base, ".crc")
}
