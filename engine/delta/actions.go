package delta

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Protocol versions this package reads and writes: reader 1, writer 2 (no
// table features). A table that asks for more is refused with
// ErrUnsupportedProtocol.
const (
	ReaderVersion = 1
	WriterVersion = 2
)

// Protocol is the protocol action: the versions a client must implement to
// read or write the table.
type Protocol struct {
	MinReaderVersion int `json:"minReaderVersion"`
	MinWriterVersion int `json:"minWriterVersion"`
}

// Format names the data files' format; always parquet here.
type Format struct {
	Provider string            `json:"provider"`
	Options  map[string]string `json:"options"`
}

// Metadata is the metaData action: the table's identity, schema and
// partitioning.
type Metadata struct {
	ID               string            `json:"id"`
	Name             string            `json:"name,omitempty"`
	Description      string            `json:"description,omitempty"`
	Format           Format            `json:"format"`
	SchemaString     string            `json:"schemaString"`
	PartitionColumns []string          `json:"partitionColumns"`
	Configuration    map[string]string `json:"configuration"`
	CreatedTime      int64             `json:"createdTime,omitempty"`
}

// Add is the add action: a data file that is part of the table.
type Add struct {
	// Path is the file's path relative to the table, URL-encoded (RFC 3986
	// path segment escaping), as the protocol requires.
	Path             string             `json:"path"`
	PartitionValues  map[string]*string `json:"partitionValues"`
	Size             int64              `json:"size"`
	ModificationTime int64              `json:"modificationTime"`
	DataChange       bool               `json:"dataChange"`
	// Stats is a JSON document (see Stats), kept as a string as the protocol
	// stores it.
	Stats string `json:"stats,omitempty"`
}

// Remove is the remove action: a data file no longer part of the table
// (a tombstone until it expires).
type Remove struct {
	Path                 string             `json:"path"`
	DeletionTimestamp    int64              `json:"deletionTimestamp"`
	DataChange           bool               `json:"dataChange"`
	ExtendedFileMetadata bool               `json:"extendedFileMetadata,omitempty"`
	PartitionValues      map[string]*string `json:"partitionValues,omitempty"`
	Size                 int64              `json:"size,omitempty"`
}

// Txn is the txn action: application appID has committed its transaction
// Version to the table. Lockstep's sink writes appID = query id, version =
// batch id.
type Txn struct {
	AppID       string `json:"appId"`
	Version     int64  `json:"version"`
	LastUpdated int64  `json:"lastUpdated,omitempty"`
}

// Action is one line of a commit file: exactly one of its fields is set.
// Actions of kinds this package does not know (cdc, domainMetadata, …) are
// read as an Action with every field nil and kept in Unknown.
type Action struct {
	Protocol   *Protocol       `json:"protocol,omitempty"`
	MetaData   *Metadata       `json:"metaData,omitempty"`
	Add        *Add            `json:"add,omitempty"`
	Remove     *Remove         `json:"remove,omitempty"`
	Txn        *Txn            `json:"txn,omitempty"`
	CommitInfo map[string]any  `json:"commitInfo,omitempty"`
	Unknown    json.RawMessage `json:"-"`
}

// Stats are an add action's per-file statistics. Values in MinValues and
// MaxValues are JSON values of the column's type: numbers, strings, booleans
// and timestamps as RFC 3339 strings with milliseconds.
type Stats struct {
	NumRecords int64            `json:"numRecords"`
	MinValues  map[string]any   `json:"minValues,omitempty"`
	MaxValues  map[string]any   `json:"maxValues,omitempty"`
	NullCount  map[string]int64 `json:"nullCount,omitempty"`
}

// logDir is the key prefix of the transaction log.
const logDir = "_delta_log/"

// lastCheckpointKey names the file that points at the newest checkpoint.
const lastCheckpointKey = logDir + "_last_checkpoint"

// commitKey returns the key of version v's commit file.
func commitKey(v int64) string { return fmt.Sprintf("%s%020d.json", logDir, v) }

// checkpointKey returns the key of version v's single-part checkpoint.
func checkpointKey(v int64) string { return fmt.Sprintf("%s%020d.checkpoint.parquet", logDir, v) }

// logFile is a file of the log, parsed from its key.
type logFile struct {
	version    int64
	checkpoint bool // a single-part checkpoint; else a commit
}

// parseLogKey recognises commit files and single-part checkpoints; other
// files of the log (multi-part checkpoints, checksums, _last_checkpoint,
// temporary files) report false.
func parseLogKey(key string) (logFile, bool) {
	name, ok := strings.CutPrefix(key, logDir)
	if !ok || len(name) < 20 {
		return logFile{}, false
	}
	digits, rest := name[:20], name[20:]
	v, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || v < 0 {
		return logFile{}, false
	}
	switch rest {
	case ".json":
		return logFile{version: v}, true
	case ".checkpoint.parquet":
		return logFile{version: v, checkpoint: true}, true
	}
	return logFile{}, false
}

// encodeCommit renders actions as a commit file: one JSON document a line.
func encodeCommit(actions []Action) ([]byte, error) {
	var buf bytes.Buffer
	for _, a := range actions {
		if a.Unknown != nil {
			buf.Write(a.Unknown)
			buf.WriteByte('\n')
			continue
		}
		b, err := json.Marshal(a)
		if err != nil {
			return nil, fmt.Errorf("encode action: %w", err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes(), nil
}

// decodeCommit parses a commit file. Blank lines are skipped.
func decodeCommit(data []byte) ([]Action, error) {
	var actions []Action
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 256<<20)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var a Action
		if err := json.Unmarshal(b, &a); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if a.Protocol == nil && a.MetaData == nil && a.Add == nil && a.Remove == nil && a.Txn == nil && a.CommitInfo == nil {
			a.Unknown = append(json.RawMessage(nil), b...)
		}
		actions = append(actions, a)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return actions, nil
}
