// Package source holds the built-in sources of the engine: files (new files
// under a local folder or an S3 prefix, as JSON lines, CSV or Parquet), rate
// (generated rows for demos and benchmarks) and nexmark (the Nexmark
// benchmark's auction events).
//
// Nothing registers itself: a program registers the kinds it offers,
//
//	reg.RegisterSource(v1.SourceFiles, source.FilesSpec(), source.NewFiles)
//	reg.RegisterSource(v1.SourceRate, source.RateSpec(), source.NewRate)
//	reg.RegisterSource(v1.SourceNexmark, source.NexmarkSpec(), source.NewNexmark)
//
// All are replayable: Read with logged offsets yields the same rows in any
// process. The files source keeps a seen-files log in its checkpoint folder
// (sources/<name>/files/<batch>, compacted into sources/<name>/compact/<batch>
// by retention); the rate and nexmark sources derive every row from their
// offsets.
//
// Records that do not parse follow the source's onMalformed policy: fail
// stops the query naming the file and line, skip counts them, deadLetter
// counts them and writes them to a JSON-lines file per batch under
// deadLetterPath (<query id>/<source>/<batch>.jsonl, rewritten identically on a
// replay).
package source
