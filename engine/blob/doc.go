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
// S3 connection settings are the checkpoint's: [S3ConfigFromEnv] reads
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION and LOCKSTEP_S3_ENDPOINT.
// Nothing here reads the environment by itself.
//
// This package is not the checkpoint store: checkpoint.Store has no
// modification times, and the checkpoint layer owns its own S3 client. The
// local folder reuses checkpoint.Dir for its atomic writes.
package blob
