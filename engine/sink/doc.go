// Package sink holds the built-in sinks of the engine: files (exactly-once,
// through a manifest log in the output folder) and console (prints rows; no
// guarantee).
//
// Nothing registers itself: a program registers the kinds it offers,
//
//	reg.RegisterSink(v1.SinkFiles, sink.FilesSpec(), sink.NewFiles)
//	reg.RegisterSink(v1.SinkConsole, sink.ConsoleSpec(), sink.NewConsole)
//
// # The files sink's manifest
//
// Each batch's data goes to files named part-<query id>-<batch>-<attempt>.<ext>;
// then one manifest entry, _lockstep_manifest/<query id>/<batch>, is created
// with create-if-absent and lists them. The entry is the commit: a batch
// replayed after a crash finds its entry and writes nothing, and of two
// engines racing on one batch exactly one entry wins. Files that no entry
// lists (left by a crash, or by the loser of a race) are never read.
// Entries are keyed by (query id, batch id), so a fresh checkpoint (a new
// query id, batches from 0 again) writing into the same folder neither skips
// its batches nor is skipped. [ReadManifest] and [ReadRows] read the output
// as readers must: through the manifest only.
//
// The spark runtime commits with the same code: its Spark job writes a
// batch's data files (one a task, named from [DataFilePrefix]) and its Go side
// calls [Files.Committed] before and [Files.Commit] after, so that both
// runtimes write one layout with one create-if-absent.
package sink
