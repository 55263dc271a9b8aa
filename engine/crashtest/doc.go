// Package crashtest kills the real `lockstep` binary while it runs a
// files→files query (a filter and a projection) and checks that the output,
// read through the files sink's manifest, equals an uninterrupted run's: no
// row lost, none duplicated.
//
// The tests build cmd/lockstep once, then:
//
//   - kill it at each phase boundary of a batch (LOCKSTEP_CRASH_AT=<phase>:<batch>:
//     after offsets/N, during the sink write, after the sink commit before
//     commits/N, after commits/N), on a local checkpoint and on S3;
//   - kill it with SIGKILL at 50 random instants, locally and on S3;
//   - start two engines on one checkpoint: one stops with "owned by another
//     writer" (exit 3);
//   - run examples/queries/quickstart.yaml, stop it with SIGINT and run it
//     again.
//   - enrich orders with a static Delta table into Delta (a stream–static
//     join refreshed on every new table version), killed at each phase of
//     batches 0 and 2 and at 50 random instants, with the table moving to a
//     new version mid-run, locally and on S3: each order is written once,
//     joined with the version its batch was planned against (a replayed batch
//     with the one its offsets entry records), as an uninterrupted run.
//
// Beyond files→files: stateful queries into files (stateful_test.go); the
// upserting sinks, a windowed and a keyed update aggregation into Delta
// (MERGE) and into PostgreSQL, killed at every phase and at random, and
// PostgreSQL stopped and started under a running query, each table checked
// against the aggregation of all input computed by the test, every Delta
// version read by DuckDB and delta-go (upsert_test.go); and soaks behind the
// S3 fault proxy (faults_test.go).
//
// The harness the tests use is exported for the crash tests of other
// packages (engine/kafka): [Build] builds the binary, [Run] runs it to its
// end, [Points] and [Point.Env] make it kill itself at a phase boundary
// ([engine.CrashAtEnv]), [KillRandomly] kills it at random instants, and [Env] keeps
// the test process's LOCKSTEP_ and AWS_ settings out of a run.
package crashtest
