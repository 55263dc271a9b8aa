// Package spark is Lockstep's second runtime: it runs a StreamingQuery on Apache Spark
// Structured Streaming (4.2: local mode from `lockstep run`, client mode with executor pods on
// Kubernetes) instead of the built-in engine, with the same spec, planner, guarantees and
// progress lines.
//
// The query is compiled here, in Go: [Compile] turns the query's logical plan (plan.Plan, built
// once by [New]) into the runner's [Plan] (sources with Spark's options, the logical plan's
// compiled CEL filter and select expressions translated to Spark SQL by [TranslateCEL], the
// watermark, the stateful steps, the sink), and refuses, naming the field and the reason, what
// Spark cannot run with the spec's meaning ([Check]). It follows the logical plan's flow and
// builds no CEL environment of its own. The runner (spark/runner, Java) only builds the query
// the plan describes, writes the data and prints Spark's progress; committing is Go's: the
// files sink's batches are committed here, by the built-in files sink's own manifest code, from
// the data files the runner reports (files.go), and the webhook and PostgreSQL sinks are the
// built-in ones, fed the rows the runner hands over (rows.go). [Query.Run] claims
// Lockstep's records in <location>/[RecordsDir] before Spark starts (Spark does not fence two
// writers; the owner record's conditional create does), writes Spark's metadata with the same
// query id, starts the runner as a child JVM ([FindRunner] finds the one `make tools` built),
// and turns each committed batch into an engine.Progress and a commit in the records.
//
// See docs/spark.md for when to choose which runtime and what differs.
package spark
