package checkpoint

// SetAfterChunk installs a hook that Dir calls after each chunk it writes to
// a temporary file, so that a test can kill a writer in the middle of a write.
func SetAfterChunk(d *Dir, f func(written int)) { d.afterChunk = f }
