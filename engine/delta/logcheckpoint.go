package delta

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/parquet-go/parquet-go"
)

// A Delta checkpoint is a Parquet file with one action per row, in columns
// txn, add, remove, metaData and protocol (each a nullable struct). These
// types are its rows; their field names are the protocol's.
type checkpointRow struct {
	Txn      *checkpointTxn      `parquet:"txn,optional"`
	Add      *checkpointAdd      `parquet:"add,optional"`
	Remove   *checkpointRemove   `parquet:"remove,optional"`
	MetaData *checkpointMetadata `parquet:"metaData,optional"`
	Protocol *checkpointProtocol `parquet:"protocol,optional"`
}

type checkpointTxn struct {
	AppID       string `parquet:"appId"`
	Version     int64  `parquet:"version"`
	LastUpdated int64  `parquet:"lastUpdated"`
}

type checkpointAdd struct {
	Path             string             `parquet:"path"`
	PartitionValues  map[string]*string `parquet:"partitionValues"`
	Size             int64              `parquet:"size"`
	ModificationTime int64              `parquet:"modificationTime"`
	DataChange       bool               `parquet:"dataChange"`
	Stats            *string            `parquet:"stats,optional"`
}

type checkpointRemove struct {
	Path                 string             `parquet:"path"`
	DeletionTimestamp    int64              `parquet:"deletionTimestamp"`
	DataChange           bool               `parquet:"dataChange"`
	ExtendedFileMetadata bool               `parquet:"extendedFileMetadata"`
	PartitionValues      map[string]*string `parquet:"partitionValues"`
	Size                 int64              `parquet:"size"`
}

type checkpointFormat struct {
	Provider string            `parquet:"provider"`
	Options  map[string]string `parquet:"options"`
}

type checkpointMetadata struct {
	ID               string            `parquet:"id"`
	Name             *string           `parquet:"name,optional"`
	Description      *string           `parquet:"description,optional"`
	Format           checkpointFormat  `parquet:"format"`
	SchemaString     string            `parquet:"schemaString"`
	PartitionColumns []string          `parquet:"partitionColumns,list"`
	CreatedTime      int64             `parquet:"createdTime"`
	Configuration    map[string]string `parquet:"configuration"`
}

type checkpointProtocol struct {
	MinReaderVersion int32 `parquet:"minReaderVersion"`
	MinWriterVersion int32 `parquet:"minWriterVersion"`
}

// lastCheckpoint is the _last_checkpoint file: a hint, written after the
// checkpoint it names, that readers start from.
type lastCheckpoint struct {
	Version       int64 `json:"version"`
	Size          int64 `json:"size"`
	SizeInBytes   int64 `json:"sizeInBytes,omitempty"`
	NumOfAddFiles int64 `json:"numOfAddFiles,omitempty"`
}

// encodeCheckpoint renders s as a checkpoint file: protocol, metadata,
// transactions, then files and tombstones ordered by path. Adds in a
// checkpoint carry dataChange false, as the protocol asks.
func encodeCheckpoint(s *Snapshot) ([]byte, lastCheckpoint, error) {
	rows := make([]checkpointRow, 0, 2+len(s.txns)+len(s.files)+len(s.tombstones))
	rows = append(rows, checkpointRow{Protocol: &checkpointProtocol{
		MinReaderVersion: int32(s.Protocol.MinReaderVersion), MinWriterVersion: int32(s.Protocol.MinWriterVersion)}})
	m := s.Metadata
	cm := &checkpointMetadata{
		ID: m.ID, Format: checkpointFormat{Provider: m.Format.Provider, Options: nonNil(m.Format.Options)},
		SchemaString: m.SchemaString, PartitionColumns: nonNilSlice(m.PartitionColumns),
		CreatedTime: m.CreatedTime, Configuration: nonNil(m.Configuration),
	}
	if m.Name != "" {
		cm.Name = &m.Name
	}
	if m.Description != "" {
		cm.Description = &m.Description
	}
	rows = append(rows, checkpointRow{MetaData: cm})
	for _, t := range s.Txns() {
		rows = append(rows, checkpointRow{Txn: &checkpointTxn{AppID: t.AppID, Version: t.Version, LastUpdated: t.LastUpdated}})
	}
	for _, p := range slices.Sorted(maps.Keys(s.files)) {
		a := s.files[p]
		ca := &checkpointAdd{Path: a.Path, PartitionValues: nonNilPV(a.PartitionValues), Size: a.Size,
			ModificationTime: a.ModificationTime, DataChange: false}
		if a.Stats != "" {
			st := a.Stats
			ca.Stats = &st
		}
		rows = append(rows, checkpointRow{Add: ca})
	}
	for _, p := range slices.Sorted(maps.Keys(s.tombstones)) {
		r := s.tombstones[p]
		rows = append(rows, checkpointRow{Remove: &checkpointRemove{Path: r.Path, DeletionTimestamp: r.DeletionTimestamp,
			DataChange: false, ExtendedFileMetadata: r.ExtendedFileMetadata, PartitionValues: nonNilPV(r.PartitionValues), Size: r.Size}})
	}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[checkpointRow](&buf, parquet.Compression(&parquet.Snappy))
	if _, err := w.Write(rows); err != nil {
		return nil, lastCheckpoint{}, fmt.Errorf("write checkpoint %d: %w", s.Version, err)
	}
	if err := w.Close(); err != nil {
		return nil, lastCheckpoint{}, fmt.Errorf("write checkpoint %d: %w", s.Version, err)
	}
	last := lastCheckpoint{Version: s.Version, Size: int64(len(rows)), SizeInBytes: int64(buf.Len()), NumOfAddFiles: int64(len(s.files))}
	return buf.Bytes(), last, nil
}

// decodeCheckpoint reads a checkpoint file into the snapshot at version.
func decodeCheckpoint(version int64, data []byte) (*Snapshot, error) {
	r := parquet.NewGenericReader[checkpointRow](bytes.NewReader(data))
	defer r.Close()
	s := emptySnapshot()
	s.Version = version
	buf := make([]checkpointRow, 256)
	for {
		clear(buf)
		n, err := r.Read(buf)
		for _, row := range buf[:n] {
			switch {
			case row.Protocol != nil:
				s.Protocol = Protocol{MinReaderVersion: int(row.Protocol.MinReaderVersion), MinWriterVersion: int(row.Protocol.MinWriterVersion)}
			case row.MetaData != nil:
				cm := row.MetaData
				m := Metadata{ID: cm.ID, Format: Format{Provider: cm.Format.Provider, Options: cm.Format.Options},
					SchemaString: cm.SchemaString, PartitionColumns: nonNilSlice(cm.PartitionColumns),
					Configuration: cm.Configuration, CreatedTime: cm.CreatedTime}
				if cm.Name != nil {
					m.Name = *cm.Name
				}
				if cm.Description != nil {
					m.Description = *cm.Description
				}
				s.Metadata = m
			case row.Txn != nil:
				s.txns[row.Txn.AppID] = Txn{AppID: row.Txn.AppID, Version: row.Txn.Version, LastUpdated: row.Txn.LastUpdated}
			case row.Add != nil:
				a := &Add{Path: row.Add.Path, PartitionValues: nonNilPV(row.Add.PartitionValues), Size: row.Add.Size,
					ModificationTime: row.Add.ModificationTime, DataChange: row.Add.DataChange}
				if row.Add.Stats != nil {
					a.Stats = *row.Add.Stats
				}
				s.files[canonicalPath(a.Path)] = a
			case row.Remove != nil:
				s.tombstones[canonicalPath(row.Remove.Path)] = &Remove{Path: row.Remove.Path, DeletionTimestamp: row.Remove.DeletionTimestamp,
					DataChange: row.Remove.DataChange, ExtendedFileMetadata: row.Remove.ExtendedFileMetadata,
					PartitionValues: row.Remove.PartitionValues, Size: row.Remove.Size}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read checkpoint %d: %w", version, err)
		}
	}
	return s, nil
}

func encodeLastCheckpoint(l lastCheckpoint) []byte {
	b, _ := json.Marshal(l)
	return append(b, '\n')
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func nonNilPV(m map[string]*string) map[string]*string {
	if m == nil {
		return map[string]*string{}
	}
	return m
}

func nonNilSlice(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
