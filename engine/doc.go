// Package engine runs a StreamingQuery as micro-batches with exactly-once
// recovery (DESIGN.md §3, §4; docs/engine.md).
//
// # Running a query
//
// A program fills a [Registry] with the source and sink kinds it offers,
// compiles a query with [New] and runs it:
//
//	reg := engine.NewRegistry()
//	_ = reg.RegisterSource(v1.SourceFiles, source.FilesSpec, source.NewFiles)
//	_ = reg.RegisterSink(v1.SinkFiles, sink.FilesSpec, sink.NewFiles)
//	q, err := engine.New(obj, reg, engine.WithCheckpoint(dir), engine.WithObserver(obs))
//	// err is an *InvalidSpecError listing every problem of the spec.
//	summary, err := q.Run(ctx) // q.Stop() from another goroutine ends it at a batch boundary
//
// New validates the spec and compiles every CEL expression once; it does no
// I/O. Run claims the checkpoint (refusing one owned by another query, with
// [ErrRefused]), builds the components and runs batches as the trigger says:
// default (the next batch as soon as the last ends, polling when idle),
// processingTime (on epoch-aligned boundaries; a missed one starts at once),
// availableNow (what was available at start, in rate-limited batches, then
// return) or once (one batch without rate limits, then return).
//
// # A batch
//
// Each batch follows the write-ahead protocol: the sources plan their end
// offsets ([Source.Plan]); offsets/N is written; the sources read exactly
// those ranges ([Source.Read]); the steps transform the rows (filter,
// select, and the stateful watermark, aggregate and dropDuplicates, which
// write their state, version N+1, before the sink: docs/state.md); the sink
// writes batch N ([Sink.Write]), idempotently per (query id,
// batch id); commits/N is written with the batch's progress. On start, a
// batch planned but not committed is re-run with its logged offsets,
// timestamp and watermark, and the previous batch's logged watermark, by
// which its stateful steps judge late rows (as Spark); otherwise the run
// plans the next batch with today's settings. Settings pinned by the checkpoint (ConfStatePartitions)
// come from the offsets log. A log entry another engine wrote first stops
// the run with [ErrOwnedByAnotherWriter].
//
// # Components
//
// Sources and sinks are small interfaces whose contracts sit on their
// methods. Optional abilities are one-method interfaces: [AvailableNowSource],
// [PurgingSource], and io.Closer. A query's delivery guarantee is not a
// component's to declare: [GuaranteeOf] reads it from the planner (package
// compat), the one place it is decided. The built-in components live in engine/source (files, rate)
// and engine/sink (files, console); their local and S3 folders are checkpoint
// Stores, opened with s3.OpenFolder (package checkpoint/s3).
//
// # Observing
//
// [WithObserver] receives a [Start] (query id, where the run resumes,
// guarantee) and a [Progress] per committed batch (rows in, out and
// malformed, durations per phase, rows/s, offsets, watermark); Run returns a
// [Summary]. [WithLogger] takes a *slog.Logger; nothing is logged by default.
// [WithStartGuard] is the hook for the compatibility check at start.
package engine
