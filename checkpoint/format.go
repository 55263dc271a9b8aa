package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// FormatVersion is the checkpoint format this package writes, and the newest
// it reads. It is recorded in metadata and as the version line ("v1") of
// every offsets and commit file.
const FormatVersion = 1

var (
	// ErrDamaged means a checkpoint file cannot be parsed, or the files
	// contradict each other. The error names the object.
	ErrDamaged = errors.New("checkpoint is damaged")

	// ErrNewerFormat means a checkpoint file was written in a format newer
	// than FormatVersion, by a newer Lockstep. The error names the object.
	ErrNewerFormat = errors.New("written by a newer lockstep")
)

// Owner names the query that owns a checkpoint location. The UID is recorded, not compared:
// see Matches.
type Owner struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

// Matches reports whether the query claim is the recorded owner o: the one ownership rule of
// both runtimes and the controller. A query is its namespace and name: one deleted with
// checkpoint.retention Retain and created again under the same name (a new UID) continues its
// checkpoint. A recorded owner without a namespace (written by `lockstep run` from a
// manifest without one) is the query of that name in any namespace.
func (o Owner) Matches(claim Owner) bool {
	return o.Name == claim.Name && (o.Namespace == "" || o.Namespace == claim.Namespace)
}

func (o Owner) String() string {
	s := o.Name
	if o.Namespace != "" {
		s = o.Namespace + "/" + s
	}
	if o.UID != "" {
		s += " (uid " + o.UID + ")"
	}
	return s
}

// Metadata is the checkpoint's identity, written once when the checkpoint is
// created (and again only when another owner adopts it).
type Metadata struct {
	// ID is the query id, a random UUID. Sinks key their idempotence by
	// (ID, batch).
	ID            string    `json:"id"`
	Owner         Owner     `json:"owner"`
	FormatVersion int       `json:"formatVersion"`
	CreatedAt     time.Time `json:"createdAt"`
}

func encodeMetadata(m Metadata) []byte {
	b, _ := json.Marshal(m) // only strings, ints and a time: cannot fail
	return append(b, '\n')
}

func decodeMetadata(data []byte) (Metadata, error) {
	var m struct {
		ID            string    `json:"id"`
		Owner         Owner     `json:"owner"`
		FormatVersion *int      `json:"formatVersion"`
		CreatedAt     time.Time `json:"createdAt"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return Metadata{}, fmt.Errorf("%w: %w", ErrDamaged, err)
	}
	switch {
	case m.FormatVersion == nil:
		return Metadata{}, fmt.Errorf("%w: no formatVersion", ErrDamaged)
	case *m.FormatVersion > FormatVersion:
		return Metadata{}, fmt.Errorf("format version %d, newer than %d, the newest this lockstep reads: %w", *m.FormatVersion, FormatVersion, ErrNewerFormat)
	case *m.FormatVersion < 1:
		return Metadata{}, fmt.Errorf("%w: format version %d", ErrDamaged, *m.FormatVersion)
	case m.ID == "":
		return Metadata{}, fmt.Errorf("%w: no query id", ErrDamaged)
	}
	return Metadata{ID: m.ID, Owner: m.Owner, FormatVersion: *m.FormatVersion, CreatedAt: m.CreatedAt}, nil
}

// Offsets is an entry of the offsets log, the write-ahead log: what batch
// BatchID reads, written before the batch runs. A restart that finds it
// without a commit re-runs the batch with exactly these offsets, watermark
// and timestamp.
type Offsets struct {
	// BatchID is the batch number. It is the entry's file name, not part of
	// its content.
	BatchID int64 `json:"-"`
	// BatchWatermarkMs is the event-time watermark the batch runs with, in
	// milliseconds since the Unix epoch.
	BatchWatermarkMs int64 `json:"batchWatermarkMs"`
	// BatchTimestampMs is the batch's processing time, in milliseconds since
	// the Unix epoch.
	BatchTimestampMs int64 `json:"batchTimestampMs"`
	// Conf holds the settings pinned by the checkpoint (such as the number of
	// state partitions); a restart must keep them.
	Conf map[string]string `json:"conf,omitempty"`
	// Sources holds the end offset of each source for this batch, one entry
	// per named source. Offset is the source's own JSON.
	Sources []SourceOffset `json:"sources"`
	// Joins holds the snapshot each stream–static join of the batch joins
	// against, one entry per join, so that a replay joins against the same.
	Joins []JoinSnapshot `json:"joins,omitempty"`
}

// JoinSnapshot is the static side's snapshot a batch joins against.
type JoinSnapshot struct {
	// Join is the join's name (spec.transform[].join.name, else join-<n>).
	Join string `json:"join"`
	// ReadAtMs is the timestamp of the batch that first read the snapshot:
	// a refresh every D is due when a batch's timestamp is D past it.
	ReadAtMs int64 `json:"readAtMs"`
	// Snapshot is the static side's own JSON: a Delta version, or a files
	// listing and its fingerprint.
	Snapshot json.RawMessage `json:"snapshot"`
	// Side names the static side the snapshot is of (its kind and location,
	// v1.StaticSide.ID), so that a join whose table changed does not read the
	// snapshot from the new one. Empty in entries written before it was recorded.
	Side string `json:"side,omitempty"`
}

// Join returns the snapshot recorded for join.
func (o Offsets) Join(join string) (JoinSnapshot, bool) {
	for _, j := range o.Joins {
		if j.Join == join {
			return j, true
		}
	}
	return JoinSnapshot{}, false
}

// SourceOffset is one source's offset in an Offsets entry.
type SourceOffset struct {
	Source string          `json:"source"`
	Offset json.RawMessage `json:"offset"`
}

// Offset returns the offset recorded for source.
func (o Offsets) Offset(source string) (json.RawMessage, bool) {
	for _, s := range o.Sources {
		if s.Source == source {
			return s.Offset, true
		}
	}
	return nil, false
}

// offsetsHeader is the second line of an offsets file.
type offsetsHeader struct {
	BatchWatermarkMs *int64            `json:"batchWatermarkMs"`
	BatchTimestampMs *int64            `json:"batchTimestampMs"`
	Conf             map[string]string `json:"conf"`
	Joins            []JoinSnapshot    `json:"joins,omitempty"`
}

func encodeOffsets(o Offsets) ([]byte, error) {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "v%d\n", FormatVersion)
	seenJoin := make(map[string]bool, len(o.Joins))
	for _, j := range o.Joins {
		if j.Join == "" || seenJoin[j.Join] || len(j.Snapshot) == 0 {
			return nil, fmt.Errorf("join snapshot %q: want a join named once, with its snapshot", j.Join)
		}
		seenJoin[j.Join] = true
	}
	h, err := json.Marshal(offsetsHeader{BatchWatermarkMs: &o.BatchWatermarkMs, BatchTimestampMs: &o.BatchTimestampMs, Conf: o.Conf, Joins: o.Joins})
	if err != nil {
		return nil, err
	}
	buf.Write(h)
	buf.WriteByte('\n')
	seen := make(map[string]bool, len(o.Sources))
	for _, s := range o.Sources {
		if s.Source == "" || strings.Contains(s.Source, "\n") {
			return nil, fmt.Errorf("source name %q", s.Source)
		}
		if seen[s.Source] {
			return nil, fmt.Errorf("source %q appears twice", s.Source)
		}
		seen[s.Source] = true
		if len(s.Offset) == 0 {
			return nil, fmt.Errorf("source %q has no offset", s.Source)
		}
		line, err := json.Marshal(s) // compacts Offset onto one line
		if err != nil {
			return nil, fmt.Errorf("source %q: %w", s.Source, err)
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	return buf.Bytes(), nil
}

func decodeOffsets(batch int64, data []byte) (Offsets, error) {
	lines, err := versionedLines(data)
	if err != nil {
		return Offsets{}, err
	}
	if len(lines) < 1 {
		return Offsets{}, fmt.Errorf("%w: no batch line after the version line", ErrDamaged)
	}
	var h offsetsHeader
	if err := json.Unmarshal(lines[0], &h); err != nil {
		return Offsets{}, fmt.Errorf("%w: line 2: %w", ErrDamaged, err)
	}
	if h.BatchWatermarkMs == nil || h.BatchTimestampMs == nil {
		return Offsets{}, fmt.Errorf("%w: line 2: want batchWatermarkMs and batchTimestampMs", ErrDamaged)
	}
	for _, j := range h.Joins {
		if j.Join == "" || len(j.Snapshot) == 0 || string(j.Snapshot) == "null" {
			return Offsets{}, fmt.Errorf("%w: line 2: a join snapshot needs its join and snapshot", ErrDamaged)
		}
	}
	o := Offsets{BatchID: batch, BatchWatermarkMs: *h.BatchWatermarkMs, BatchTimestampMs: *h.BatchTimestampMs, Conf: h.Conf, Joins: h.Joins, Sources: []SourceOffset{}}
	for i, line := range lines[1:] {
		var s SourceOffset
		if err := json.Unmarshal(line, &s); err != nil {
			return Offsets{}, fmt.Errorf("%w: line %d: %w", ErrDamaged, i+3, err)
		}
		if s.Source == "" || len(s.Offset) == 0 || string(s.Offset) == "null" {
			return Offsets{}, fmt.Errorf("%w: line %d: want a source and its offset", ErrDamaged, i+3)
		}
		if _, dup := o.Offset(s.Source); dup {
			return Offsets{}, fmt.Errorf("%w: line %d: source %q appears twice", ErrDamaged, i+3, s.Source)
		}
		o.Sources = append(o.Sources, s)
	}
	return o, nil
}

// Commit is an entry of the commit log, written after the sink has committed
// batch BatchID.
type Commit struct {
	// BatchID is the batch number. It is the entry's file name, not part of
	// its content.
	BatchID int64 `json:"-"`
	// NextBatchWatermarkMs is the watermark the next batch starts from.
	NextBatchWatermarkMs int64 `json:"nextBatchWatermarkMs"`
	// WatermarksMs holds the watermark of each side of a stream–stream join
	// after the batch, keyed by the side's state operator (<join>.left,
	// <join>.right); NextBatchWatermarkMs is their minimum. Kept here so that
	// a restarted query continues each side's watermark exactly.
	WatermarksMs map[string]int64 `json:"watermarksMs,omitempty"`
	// Progress describes the batch, for people and for the controller.
	Progress Progress `json:"progress"`
}

// DurationTotal is the key of Progress.DurationMs that holds the whole batch's duration,
// as in Spark's progress.
const DurationTotal = "triggerExecution"

// Progress describes a committed batch.
type Progress struct {
	// Timestamp is when the batch committed.
	Timestamp     time.Time `json:"timestamp"`
	NumInputRows  int64     `json:"numInputRows"`
	NumOutputRows int64     `json:"numOutputRows"`
	// DurationMs holds the time spent per phase, in milliseconds; keys are
	// the engine's phase names (DurationTotal, "addBatch", "walCommit"…).
	DurationMs map[string]int64 `json:"durationMs,omitempty"`
	// Sources holds per-source progress, in the order of the offsets entry.
	Sources []SourceProgress `json:"sources,omitempty"`
}

// SourceProgress is one source's part of a batch's progress.
type SourceProgress struct {
	Source       string          `json:"source"`
	StartOffset  json.RawMessage `json:"startOffset,omitempty"`
	EndOffset    json.RawMessage `json:"endOffset,omitempty"`
	NumInputRows int64           `json:"numInputRows"`
	// NumMalformedRows counts the records the source's onMalformed policy
	// skipped or dead-lettered in the batch.
	NumMalformedRows int64 `json:"numMalformedRows,omitempty"`
	// LatestOffset is the newest offset the source had when the batch was
	// planned, when the source can tell.
	LatestOffset json.RawMessage `json:"latestOffset,omitempty"`
	// Lag is how many records the source held beyond EndOffset when the batch
	// was planned; nil when the source cannot tell.
	Lag *int64 `json:"lag,omitempty"`
	// LagMs is how old, at the batch's timestamp, the newest record read up
	// to EndOffset was, where records remained beyond it (the largest over
	// the source's partitions); nil when the source cannot tell.
	LagMs *int64 `json:"lagMs,omitempty"`
}

func encodeCommit(c Commit) ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, "v%d\n%s\n", FormatVersion, b), nil
}

func decodeCommit(batch int64, data []byte) (Commit, error) {
	lines, err := versionedLines(data)
	if err != nil {
		return Commit{}, err
	}
	if len(lines) != 1 {
		return Commit{}, fmt.Errorf("%w: want one JSON line after the version line, found %d", ErrDamaged, len(lines))
	}
	var c struct {
		NextBatchWatermarkMs *int64           `json:"nextBatchWatermarkMs"`
		WatermarksMs         map[string]int64 `json:"watermarksMs"`
		Progress             Progress         `json:"progress"`
	}
	if err := json.Unmarshal(lines[0], &c); err != nil {
		return Commit{}, fmt.Errorf("%w: line 2: %w", ErrDamaged, err)
	}
	if c.NextBatchWatermarkMs == nil {
		return Commit{}, fmt.Errorf("%w: line 2: no nextBatchWatermarkMs", ErrDamaged)
	}
	return Commit{BatchID: batch, NextBatchWatermarkMs: *c.NextBatchWatermarkMs, WatermarksMs: c.WatermarksMs, Progress: c.Progress}, nil
}

// versionedLines checks the version line ("v1") of a log file and returns the
// lines after it.
func versionedLines(data []byte) ([][]byte, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: empty file", ErrDamaged)
	}
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	first := string(lines[0])
	v, err := strconv.Atoi(strings.TrimPrefix(first, "v"))
	if !strings.HasPrefix(first, "v") || err != nil || v < 1 || len(first) > 12 {
		return nil, fmt.Errorf("%w: first line %.20q is not a version line like \"v1\"", ErrDamaged, first)
	}
	if v > FormatVersion {
		return nil, fmt.Errorf("format v%d, newer than v%d, the newest this lockstep reads: %w", v, FormatVersion, ErrNewerFormat)
	}
	for i, l := range lines[1:] {
		if len(bytes.TrimSpace(l)) == 0 {
			return nil, fmt.Errorf("%w: line %d is empty", ErrDamaged, i+2)
		}
	}
	return lines[1:], nil
}
