package sparkckpt

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// FileEntry is one file the file source took: a line of its log (sources/<id>/<batch> and
// <batch>.compact).
type FileEntry struct {
	Path      string `json:"path"`
	Timestamp int64  `json:"timestamp"`
	BatchID   int64  `json:"batchId"`
}

// ParseFileSourceLog reads one file of the file source's log: its version line, then one
// JSON object per line.
func ParseFileSourceLog(file string, data []byte) ([]FileEntry, error) {
	_, rest, err := versionLine(file, "file source log", data, FileSourceLogVersion)
	if err != nil {
		return nil, err
	}
	var out []FileEntry
	for i, line := range strings.Split(string(rest), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var e FileEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return nil, fmt.Errorf("file source log %s: line %d: %w", file, i+2, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// ParseKafkaInitialOffsets reads the Kafka source's initial offsets (sources/<id>/0): one
// 0x00 byte, the version line, then {"topic":{"partition":offset}}.
func ParseKafkaInitialOffsets(file string, data []byte) (map[string]map[string]int64, error) {
	data = bytes.TrimPrefix(data, []byte{0})
	_, rest, err := versionLine(file, "Kafka initial offsets", data, KafkaInitialVersion)
	if err != nil {
		return nil, err
	}
	var m map[string]map[string]int64
	if err := json.Unmarshal(bytes.TrimSpace(rest), &m); err != nil {
		return nil, fmt.Errorf("initial offsets of a Kafka source, %s: %w", file, err)
	}
	return m, nil
}

func sortBy[T any](s []T, key func(T) string) {
	slices.SortFunc(s, func(a, b T) int { return cmp.Compare(key(a), key(b)) })
}
