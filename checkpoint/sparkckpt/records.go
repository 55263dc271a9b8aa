package sparkckpt

// RecordsDir is the folder, inside a checkpoint location that Lockstep's spark runtime writes,
// that holds Lockstep's own records (owner metadata, shape per batch, a commit per batch with
// its progress) in the built-in checkpoint layout, beside Spark's own files. The engine
// writes it (engine/spark); the controller reads a spark query's status and judgement from it.
const RecordsDir = "_lockstep"
