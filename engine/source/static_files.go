package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/codec"
)

// StaticFilesSpec describes the static side of a stream–static join on a folder of files.
func StaticFilesSpec() engine.ComponentSpec {
	return engine.ComponentSpec{
		Summary: "Reads every file of a folder as the static side of a join; the batch records the listing it joined against (names, sizes, modification times, and their fingerprint), and a replay reads exactly those files.",
		Fields: []engine.FieldSpec{
			{Name: "path", Description: "the folder"},
			{Name: "format", Description: "json, csv or parquet"},
			{Name: "s3", Description: "S3 settings of another server or account"},
		},
	}
}

// filesSnapshot names a snapshot of a static folder: its listing and the listing's SHA-256.
type filesSnapshot struct {
	Fingerprint string      `json:"fingerprint"`
	Files       []fileEntry `json:"files"`
}

// StaticFiles is a folder read as the static side of a join.
type StaticFiles struct {
	format v1.FileFormat
	folder checkpoint.Store
	dec    *codec.Decoder
}

// NewStaticFiles returns the static side of spec, a folder of files. It opens the folder but
// reads nothing.
func NewStaticFiles(_ context.Context, spec *v1.StaticSide, env engine.StaticEnv) (engine.StaticTable, error) {
	if spec.Files == nil || spec.Schema == nil {
		return nil, errors.New("not a files static side with a schema")
	}
	folder, err := env.Open(spec.Files.Path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", spec.Files.Path, err)
	}
	return &StaticFiles{format: spec.Files.Format, folder: folder, dec: codec.NewDecoder(spec.Schema.Columns)}, nil
}

// Latest lists the folder: its visible files by name, with sizes and modification times.
func (s *StaticFiles) Latest(ctx context.Context) (engine.Snapshot, error) {
	objs, err := s.folder.List(ctx, "")
	if err != nil {
		return nil, err
	}
	sn := filesSnapshot{Files: []fileEntry{}}
	for _, o := range checkpoint.Visible(objs) {
		sn.Files = append(sn.Files, fileEntry{Path: o.Key, Size: o.Size, MtimeMs: o.ModTime.UnixMilli()})
	}
	slices.SortFunc(sn.Files, func(a, b fileEntry) int { return strings.Compare(a.Path, b.Path) })
	listing, _ := json.Marshal(sn.Files)
	sum := sha256.Sum256(listing)
	sn.Fingerprint = "sha256:" + hex.EncodeToString(sum[:])
	return json.Marshal(sn)
}

// Files returns the locations of the files the snapshot name (Latest's) lists, in name order,
// for a reader of its own (the spark runtime's) to read exactly them. A file gone or of
// another size since the listing is an error, as in Read; it lists the folder and reads no
// file.
func (s *StaticFiles) Files(ctx context.Context, name engine.Snapshot) ([]string, error) {
	var sn filesSnapshot
	if err := json.Unmarshal(name, &sn); err != nil {
		return nil, fmt.Errorf("files snapshot: %w", err)
	}
	objs, err := s.folder.List(ctx, "")
	if err != nil {
		return nil, err
	}
	sizes := map[string]int64{}
	for _, o := range checkpoint.Visible(objs) {
		sizes[o.Key] = o.Size
	}
	out := make([]string, 0, len(sn.Files))
	for _, e := range sn.Files {
		size, ok := sizes[e.Path]
		if !ok {
			return nil, fmt.Errorf("%s/%s, part of snapshot %s, is gone (a static folder's files must stay while the query joins against them): %w",
				s.folder.Location(), e.Path, sn.Fingerprint, checkpoint.ErrNotFound)
		}
		if size != e.Size {
			return nil, fmt.Errorf("%s/%s is %d bytes, not the %d of snapshot %s: it was rewritten since; replace files of a static folder by writing new names",
				s.folder.Location(), e.Path, size, e.Size, sn.Fingerprint)
		}
		out = append(out, s.folder.Location()+"/"+e.Path)
	}
	return out, nil
}

// Read reads exactly the listed files, in name order. A file gone or of another size since
// the listing is an error: the snapshot can no longer be read as it was. A malformed record
// is an error too: a static side has no onMalformed policy.
func (s *StaticFiles) Read(ctx context.Context, name engine.Snapshot) ([]engine.Row, error) {
	var sn filesSnapshot
	if err := json.Unmarshal(name, &sn); err != nil {
		return nil, fmt.Errorf("files snapshot: %w", err)
	}
	var rows []engine.Row
	for _, e := range sn.Files {
		data, err := s.folder.Get(ctx, e.Path)
		if err != nil {
			return nil, fmt.Errorf("read %s/%s, part of snapshot %s (a static folder's files must stay while a batch that joins against them may be replayed): %w",
				s.folder.Location(), e.Path, sn.Fingerprint, err)
		}
		if int64(len(data)) != e.Size {
			return nil, fmt.Errorf("%s/%s is %d bytes, not the %d of snapshot %s: it was rewritten since; replace files of a static folder by writing new names",
				s.folder.Location(), e.Path, len(data), e.Size, sn.Fingerprint)
		}
		var failed error
		r := s.dec.Decode(s.format, data, func(m codec.Malformed) {
			if failed == nil {
				failed = fmt.Errorf("%w in %s/%s line %d: %s (a static side takes no onMalformed policy)", ErrMalformed, s.folder.Location(), e.Path, m.Line, m.Reason)
			}
		})
		if failed != nil {
			return nil, failed
		}
		rows = append(rows, r...)
	}
	return rows, nil
}
