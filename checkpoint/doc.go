// Package checkpoint is a streaming query's checkpoint: its identity and its
// only memory of progress.
//
// Two layers fit together:
//
//   - Store is a small interface over the objects of one location: Get,
//     Create (create-if-absent, atomic), Put (overwrite), List (in order) and
//     Delete. Dir implements it on a local folder; package checkpoint/s3 on
//     S3 and MinIO. Both pass the conformance suite in checkpoint/storetest.
//     Open turns a location ("/path", "file:///path", "s3://bucket/prefix")
//     into a Store; s3:// needs the opener from checkpoint/s3, passed as a
//     value with WithS3 (this package cannot import that one, and nothing
//     registers itself). The same Store serves every location Lockstep
//     reads or writes: sources' and sinks' data folders (opened with
//     s3.OpenFolder, which sends no request) and Delta tables too; Visible
//     leaves out the files their readers skip.
//
//   - Checkpoint is the layout of DESIGN.md §3 over a Store: the metadata
//     (query id, owner, format version), the offsets write-ahead log, the
//     commit log, the shape log, and key helpers for the sources/ and state/
//     files whose content belongs to their users. Claim opens a location for
//     a writer and checks its owner; Load opens it to read. Log entries are
//     written with Create, so a second writer on the location loses the next
//     entry with ErrFenced. Head tells a restart what to do; Purge applies
//     retention; Describe summarizes a checkpoint for `lockstep checkpoint`.
//
// Errors callers branch on are sentinels: ErrNotFound (fs.ErrNotExist),
// ErrExists, ErrFenced, ErrOwnerMismatch (an *OwnerMismatchError), ErrDamaged,
// ErrNewerFormat, ErrInvalidLocation, ErrInvalidKey, ErrReadOnly. Errors
// about a file name the object.
//
// The file formats are described, with an example of each, in
// docs/checkpoint-format.md.
package checkpoint
