// Package blob opens the data folders of sources and sinks: the objects under
// a local folder or an S3 prefix.
//
// A [Folder] is the checkpoint's Store (package checkpoint): one storage model,
// with one local implementation (checkpoint.Dir) and one S3 implementation
// (package checkpoint/s3), each walking its tree in one place. It lists objects
// with their size and modification time, reads and writes whole objects, and
// creates an object only if it is absent (the files sink's manifest relies on
// it, as the checkpoint's logs do). [Open] turns a location, parsed by
// checkpoint.ParseLocation, into a Folder:
//
//	/abs/path, rel/path, file:///abs/path   a local folder (checkpoint.OpenDir)
//	s3://bucket/prefix                      a prefix of an S3 or MinIO bucket (s3.New)
//
// [Visible] leaves out the files readers skip (names starting with "." or "_").
package blob
