package checkpoint

import (
	"fmt"
	"strconv"
	"strings"
)

// Keys of the checkpoint layout (docs/checkpoint-format.md). Batch numbers and
// state versions are written with 20 digits, zero-padded, so that the
// lexicographic order of a listing is the numeric order.
const (
	MetadataKey = "metadata"
	OffsetsDir  = "offsets/"
	CommitsDir  = "commits/"
	ShapeDir    = "shape/"
	SourcesDir  = "sources/"
	StateDir    = "state/"

	// latestKey holds a hint: the newest batch known to be committed. See
	// Checkpoint.Head.
	latestKey = "_latest"
)

const batchDigits = 20

// OffsetsKey is the key of batch's entry in the offsets log.
func OffsetsKey(batch int64) string { return OffsetsDir + BatchName(batch) }

// CommitKey is the key of batch's entry in the commit log.
func CommitKey(batch int64) string { return CommitsDir + BatchName(batch) }

// ShapeKey is the key of the shape in force from batch on.
func ShapeKey(batch int64) string { return ShapeDir + BatchName(batch) }

// BatchName is the file name of batch in a log: 20 digits, zero-padded.
func BatchName(batch int64) string { return fmt.Sprintf("%0*d", batchDigits, batch) }

// ParseBatchName is the inverse of BatchName. It accepts only names that
// BatchName makes.
func ParseBatchName(name string) (int64, bool) {
	if len(name) != batchDigits || strings.Trim(name, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(name, 10, 64)
	return n, err == nil
}

// SourceKey is the key of a source's private file: sources/<source>/<name>.
// name may contain slashes.
func SourceKey(source, name string) string { return SourcesDir + source + "/" + name }

// StateMetadataKey is the key of a stateful operator's metadata:
// state/<op>/_metadata.
func StateMetadataKey(op string) string { return StateDir + op + "/_metadata" }

// StateFileKind tells a delta from a snapshot.
type StateFileKind string

const (
	// StateDelta holds the changes made by one version.
	StateDelta StateFileKind = "delta"
	// StateSnapshot holds a partition's whole state at one version.
	StateSnapshot StateFileKind = "snapshot"
)

// StateFile names one versioned file of a state store partition.
type StateFile struct {
	Operator  string
	Partition int
	Version   int64
	Kind      StateFileKind
}

// Key returns state/<op>/<partition>/<version>.<kind>, the version in 20 digits.
func (f StateFile) Key() string {
	return fmt.Sprintf("%s%s/%d/%s.%s", StateDir, f.Operator, f.Partition, BatchName(f.Version), f.Kind)
}

// ParseStateFile is the inverse of StateFile.Key. It reports false for any
// other key under state/ (such as an operator's _metadata).
func ParseStateFile(key string) (StateFile, bool) {
	rest, ok := strings.CutPrefix(key, StateDir)
	if !ok {
		return StateFile{}, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[0] == "" {
		return StateFile{}, false
	}
	part, err := strconv.Atoi(parts[1])
	if err != nil || part < 0 || strconv.Itoa(part) != parts[1] {
		return StateFile{}, false
	}
	name, kind, ok := strings.Cut(parts[2], ".")
	if !ok || (StateFileKind(kind) != StateDelta && StateFileKind(kind) != StateSnapshot) {
		return StateFile{}, false
	}
	v, ok := ParseBatchName(name)
	if !ok {
		return StateFile{}, false
	}
	return StateFile{Operator: parts[0], Partition: part, Version: v, Kind: StateFileKind(kind)}, true
}
