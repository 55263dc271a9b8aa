// Package blob reads and writes the data files of sources and sinks: the
// objects under a local folder or an S3 prefix.
//
// A [Folder] lists objects with their size and modification time (the files
// source takes new files oldest first), reads and writes whole objects, and
// creates an object only if it is absent (the files sink's manifest relies
// on it, as the checkpoint's logs do). [Open] turns a location into a Folder:
//
//	/abs/path, rel/path, file:///abs/path   a local folder ([OpenDir])
//	s3://bucket/prefix                      a prefix of an S3 or MinIO bucket ([OpenS3])
//
// There is one S3 layer: an S3 folder is package checkpoint/s3's Store, with
// its settings (options over the environment variables defined there),
// retries and resolution of uncertain creates. The local folder reuses
// checkpoint.Dir for its atomic writes.
package blob
