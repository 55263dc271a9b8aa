package sparkckpt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Newest versions this package reads.
const (
	OffsetsVersion          = 2
	CommitVersion           = 3
	OperatorMetadataVersion = 2
	StateSchemaVersion      = 3
	FileSourceLogVersion    = 1
	KafkaInitialVersion     = 1
)

// UnsupportedVersionError is a file of a version this package does not read.
type UnsupportedVersionError struct {
	// File is the file's key in the checkpoint; Kind what it is ("offsets log").
	File, Kind string
	Found      int
	Newest     int
}

func (e *UnsupportedVersionError) Error() string {
	return fmt.Sprintf("%s %s is version v%d; this Lockstep reads %s files up to v%d: upgrade Lockstep, or describe the checkpoint with the Spark that wrote it",
		e.Kind, e.File, e.Found, e.Kind, e.Newest)
}

// versionLine splits a log file into its version (the first line, "v<N>") and the rest.
func versionLine(file, kind string, data []byte, newest int) (int, []byte, error) {
	line, rest, _ := bytes.Cut(data, []byte("\n"))
	v, err := parseVersion(string(line))
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", kind, file, err)
	}
	if v > newest {
		return 0, nil, &UnsupportedVersionError{File: file, Kind: kind, Found: v, Newest: newest}
	}
	return v, rest, nil
}

func parseVersion(s string) (int, error) {
	s = strings.TrimSpace(s)
	v, err := strconv.Atoi(strings.TrimPrefix(s, "v"))
	if !strings.HasPrefix(s, "v") || err != nil || v < 1 {
		return 0, fmt.Errorf("first line %q is not a log version such as v1", s)
	}
	return v, nil
}

// Metadata is the checkpoint's metadata file.
type Metadata struct {
	// ID is the query id: it stays for the checkpoint's life.
	ID string `json:"id"`
}

// ParseMetadata reads the metadata file.
func ParseMetadata(data []byte) (Metadata, error) {
	var m Metadata
	if err := json.Unmarshal(bytes.TrimSpace(data), &m); err != nil {
		return Metadata{}, fmt.Errorf("read metadata: %w", err)
	}
	if m.ID == "" {
		return Metadata{}, fmt.Errorf("read metadata: no query id")
	}
	return m, nil
}

// Offsets is one entry of the offsets log (offsets/<N>): what batch N reads.
type Offsets struct {
	Version int   `json:"version"`
	BatchID int64 `json:"batchId"`
	// WatermarkMs and TimestampMs are the batch's watermark and timestamp.
	WatermarkMs int64 `json:"batchWatermarkMs"`
	TimestampMs int64 `json:"batchTimestampMs"`
	// Conf holds the settings the checkpoint pins (spark.sql.shuffle.partitions, the state
	// store provider and format versions, …): on restart they override the session's.
	Conf map[string]string `json:"conf"`
	// Sources holds one offset per source: in v1 by position (ID is the ordinal), in v2 by
	// the source's id or name.
	Sources []SourceOffset `json:"sources"`
	// SourceMetadata (v2) describes each source by id.
	SourceMetadata []SourceMetadata `json:"sourceMetadata,omitempty"`
}

// SourceOffset is a source's end offset in a batch.
type SourceOffset struct {
	// ID is the source's ordinal (v1) or its id or name (v2).
	ID string `json:"id"`
	// Offset is the source's own JSON ({"topic":{"0":23}}, {"logOffset":3}, …); nil when the
	// source had none yet ("-" in v1).
	Offset json.RawMessage `json:"offset"`
}

// SourceMetadata is what offsets v2 records of a source.
type SourceMetadata struct {
	SourceID     string `json:"sourceId"`
	ProviderName string `json:"providerName"`
	APIVersion   string `json:"apiVersion"`
}

type offsetsMeta struct {
	BatchWatermarkMs   int64             `json:"batchWatermarkMs"`
	BatchTimestampMs   int64             `json:"batchTimestampMs"`
	Conf               map[string]string `json:"conf"`
	SourceMetadataInfo json.RawMessage   `json:"sourceMetadataInfo"`
}

// ParseOffsets reads offsets/<batch>.
func ParseOffsets(file string, batch int64, data []byte) (Offsets, error) {
	v, rest, err := versionLine(file, "offsets log", data, OffsetsVersion)
	if err != nil {
		return Offsets{}, err
	}
	lines := strings.Split(strings.TrimRight(string(rest), "\n"), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) == "" {
		return Offsets{}, fmt.Errorf("offsets log %s: no batch metadata line", file)
	}
	var m offsetsMeta
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		return Offsets{}, fmt.Errorf("offsets log %s: batch metadata: %w", file, err)
	}
	o := Offsets{Version: v, BatchID: batch, WatermarkMs: m.BatchWatermarkMs, TimestampMs: m.BatchTimestampMs, Conf: m.Conf}
	if len(m.SourceMetadataInfo) > 0 && string(m.SourceMetadataInfo) != "null" {
		o.SourceMetadata, err = sourceMetadata(m.SourceMetadataInfo)
		if err != nil {
			return Offsets{}, fmt.Errorf("offsets log %s: sourceMetadataInfo: %w", file, err)
		}
	}
	for i, line := range lines[1:] {
		switch v {
		case 1:
			so := SourceOffset{ID: strconv.Itoa(i)}
			if line != "-" {
				so.Offset = json.RawMessage(line)
			}
			o.Sources = append(o.Sources, so)
		default:
			id, off, ok := strings.Cut(line, ":")
			if !ok {
				return Offsets{}, fmt.Errorf("offsets log %s: line %d %q is not sourceId:offset", file, i+3, line)
			}
			o.Sources = append(o.Sources, SourceOffset{ID: id, Offset: json.RawMessage(off)})
		}
	}
	return o, nil
}

// sourceMetadata reads sourceMetadataInfo: a map by source id, or a list.
func sourceMetadata(raw json.RawMessage) ([]SourceMetadata, error) {
	var byID map[string]SourceMetadata
	if err := json.Unmarshal(raw, &byID); err == nil {
		out := make([]SourceMetadata, 0, len(byID))
		for id, m := range byID {
			if m.SourceID == "" {
				m.SourceID = id
			}
			out = append(out, m)
		}
		sortBy(out, func(m SourceMetadata) string { return m.SourceID })
		return out, nil
	}
	var list []SourceMetadata
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, err
	}
	return list, nil
}

// Commit is one entry of the commit log (commits/<N>): batch N is done.
type Commit struct {
	Version int   `json:"version"`
	BatchID int64 `json:"batchId"`
	// NextBatchWatermarkMs is the watermark the next batch runs with.
	NextBatchWatermarkMs int64 `json:"nextBatchWatermarkMs"`
	// StateUniqueIDs (v2: state checkpoint format 2) names each operator's state files.
	StateUniqueIDs json.RawMessage `json:"stateUniqueIds,omitempty"`
	// SinkMetadata (v3: sink evolution) describes the sinks.
	SinkMetadata json.RawMessage `json:"sinkMetadataMap,omitempty"`
}

// ParseCommit reads commits/<batch>.
func ParseCommit(file string, batch int64, data []byte) (Commit, error) {
	v, rest, err := versionLine(file, "commit log", data, CommitVersion)
	if err != nil {
		return Commit{}, err
	}
	c := Commit{Version: v, BatchID: batch}
	if body := bytes.TrimSpace(rest); len(body) > 0 {
		if err := json.Unmarshal(body, &c); err != nil {
			return Commit{}, fmt.Errorf("commit log %s: %w", file, err)
		}
	}
	c.Version, c.BatchID = v, batch
	return c, nil
}
