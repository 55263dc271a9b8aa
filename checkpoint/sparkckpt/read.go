package sparkckpt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

// Checkpoint is what a Spark checkpoint records.
type Checkpoint struct {
	// Location is where it is, for messages.
	Location string   `json:"location"`
	Metadata Metadata `json:"metadata"`
	// Planned and Committed are the batch ids the offsets and commit logs retain, in order.
	Planned   []int64 `json:"planned"`
	Committed []int64 `json:"committed"`
	// Latest is the newest offsets entry, LatestCommit the newest commit; nil when none.
	Latest       *Offsets `json:"latest,omitempty"`
	LatestCommit *Commit  `json:"latestCommit,omitempty"`
	// Sources are the sources of the newest batch, in its order.
	Sources []Source `json:"sources"`
	// Operators are the stateful operators, by id.
	Operators []Operator `json:"operators"`
}

// Source is one source as the checkpoint knows it.
type Source struct {
	// ID is its ordinal (offsets v1) or its id or name (v2: a name given with
	// DataStreamReader.name).
	ID string `json:"id"`
	// Kind is inferred from its offset and its files: kafka, files, delta, rate, or "" when
	// the checkpoint does not say.
	Kind string `json:"kind,omitempty"`
	// Provider is the source's provider as offsets v2 records it, "" in v1.
	Provider string `json:"provider,omitempty"`
	// Offset is its end offset in the newest batch, nil when it had none.
	Offset json.RawMessage `json:"offset,omitempty"`
	// KafkaInitial holds a Kafka source's starting offsets (sources/<id>/0).
	KafkaInitial map[string]map[string]int64 `json:"kafkaInitialOffsets,omitempty"`
	// Files counts the files a file source's log lists, and Folders are the folders they
	// are in (as Spark writes paths: file:/…, s3a://…), each once.
	Files   int      `json:"files,omitempty"`
	Folders []string `json:"folders,omitempty"`
}

// Operator is a stateful operator with its stores' schemas.
type Operator struct {
	OperatorMetadata
	// Schemas holds each store's schema, by store name ("default" for the operators with
	// one store; left-keyToNumValues, … for a join).
	Schemas map[string]StateSchema `json:"schemas,omitempty"`
	// Windows samples the windows of the state rows of an operator whose state key has one
	// (a windowed aggregation), read from its newest state files; nil when it has none, or
	// when its store is not the HDFS-backed one this reader knows.
	Windows []Window `json:"windows,omitempty"`
}

// IsSparkCheckpoint reports whether store holds a Spark checkpoint: a metadata file with
// only the query id (Lockstep's own also records its owner and format version).
func IsSparkCheckpoint(ctx context.Context, store checkpoint.Store) (bool, error) {
	data, err := store.Get(ctx, "metadata")
	if errors.Is(err, checkpoint.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(bytes.TrimSpace(data), &m) != nil {
		return false, nil
	}
	_, id := m["id"]
	_, owner := m["owner"]
	_, format := m["formatVersion"]
	return id && !owner && !format, nil
}

// Read reads the Spark checkpoint in store.
func Read(ctx context.Context, store checkpoint.Store) (*Checkpoint, error) {
	c := &Checkpoint{Location: store.Location()}
	data, err := store.Get(ctx, "metadata")
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", store.Location(), err)
	}
	if c.Metadata, err = ParseMetadata(data); err != nil {
		return nil, fmt.Errorf("%s: %w", store.Location(), err)
	}
	if c.Planned, err = batches(ctx, store, "offsets/"); err != nil {
		return nil, err
	}
	if c.Committed, err = batches(ctx, store, "commits/"); err != nil {
		return nil, err
	}
	if n := len(c.Planned); n > 0 {
		o, err := readLog(ctx, store, "offsets/", c.Planned[n-1], ParseOffsets)
		if err != nil {
			return nil, err
		}
		c.Latest = &o
	}
	if n := len(c.Committed); n > 0 {
		cm, err := readLog(ctx, store, "commits/", c.Committed[n-1], ParseCommit)
		if err != nil {
			return nil, err
		}
		c.LatestCommit = &cm
	}
	if err := c.readSources(ctx, store); err != nil {
		return nil, err
	}
	if err := c.readOperators(ctx, store); err != nil {
		return nil, err
	}
	return c, nil
}

// ConfSourceEvolution is the Spark setting that lets a query name its sources
// (DataStreamReader.name); the offsets log pins it.
const ConfSourceEvolution = "spark.sql.streaming.queryEvolution.enableSourceEvolution"

// NamesSources reports whether the query that logged o names its sources: it pins source
// evolution on. A query that does not keeps each source's own log (the files read, Kafka's
// starting offsets) under sources/<position>, not sources/<name>.
func (o *Offsets) NamesSources() bool { return o.Conf[ConfSourceEvolution] == "true" }

// UnnamedSources reports whether the Spark checkpoint in store belongs to a query that reads
// sources it did not name, by its offsets entry of batch planned (the newest, as Newest
// returns it); false when planned is negative (no batch).
func UnnamedSources(ctx context.Context, store checkpoint.Store, planned int64) (bool, error) {
	if planned < 0 {
		return false, nil
	}
	o, err := readLog(ctx, store, "offsets/", planned, ParseOffsets)
	if err != nil {
		return false, err
	}
	return len(o.Sources) > 0 && !o.NamesSources(), nil
}

// batches lists the batch files of a log folder: bare numbers (Spark does not pad them),
// without checksum files.
func batches(ctx context.Context, store checkpoint.Store, dir string) ([]int64, error) {
	keys, err := checkpoint.ListKeys(ctx, store, dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var out []int64
	for _, k := range keys {
		name := strings.TrimPrefix(k, dir)
		if n, err := strconv.ParseInt(name, 10, 64); err == nil && n >= 0 && !strings.Contains(name, "/") {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

func readLog[T any](ctx context.Context, store checkpoint.Store, dir string, batch int64, parse func(string, int64, []byte) (T, error)) (T, error) {
	key := dir + strconv.FormatInt(batch, 10)
	data, err := store.Get(ctx, key)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("read %s: %w", key, err)
	}
	return parse(key, batch, data)
}

func (c *Checkpoint) readSources(ctx context.Context, store checkpoint.Store) error {
	if c.Latest == nil {
		return nil
	}
	provider := map[string]string{}
	for _, m := range c.Latest.SourceMetadata {
		provider[m.SourceID] = m.ProviderName
	}
	named, err := namedSourceDir(ctx, store, c.Latest)
	if err != nil {
		return err
	}
	for _, so := range c.Latest.Sources {
		s := Source{ID: so.ID, Offset: so.Offset, Provider: provider[so.ID], Kind: kindOfOffset(so.Offset)}
		dir := "sources/" + so.ID + "/"
		if named != "" {
			dir = "sources/" + named + "/"
		}
		keys, err := checkpoint.ListKeys(ctx, store, dir)
		if err != nil {
			return fmt.Errorf("list %s: %w", dir, err)
		}
		// A file source's log: its newest <N>.compact holds every entry up to batch N, and the
		// batch files after it the rest; older files may linger until Spark deletes them.
		compact := int64(-1)
		for _, k := range keys {
			if n, ok := strings.CutSuffix(strings.TrimPrefix(k, dir), ".compact"); ok {
				if b, err := strconv.ParseInt(n, 10, 64); err == nil {
					compact = max(compact, b)
				}
			}
		}
		for _, k := range keys {
			name := strings.TrimPrefix(k, dir)
			if strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".crc") || strings.Contains(name, "/") {
				continue
			}
			n, isCompact := strings.CutSuffix(name, ".compact")
			b, err := strconv.ParseInt(n, 10, 64)
			if err != nil || b < compact || b == compact && !isCompact {
				continue
			}
			data, err := store.Get(ctx, k)
			if err != nil {
				return fmt.Errorf("read %s: %w", k, err)
			}
			switch {
			case len(data) > 0 && data[0] == 0: // the Kafka source's initial offsets
				if s.KafkaInitial, err = ParseKafkaInitialOffsets(k, data); err != nil {
					return err
				}
				s.Kind = "kafka"
			default:
				entries, err := ParseFileSourceLog(k, data)
				if err != nil {
					return err
				}
				s.Files += len(entries)
				for _, e := range entries {
					if d := folder(e.Path); !slices.Contains(s.Folders, d) {
						s.Folders = append(s.Folders, d)
					}
				}
				if s.Kind == "" {
					s.Kind = "files"
				}
			}
		}
		c.Sources = append(c.Sources, s)
	}
	return nil
}

// namedSourceDir returns the folder of the one source of a query that names its sources
// (DataStreamReader.name, which needs source evolution on) while its offsets log lists them
// by position (v1, as Spark 4.2 writes it): Spark keeps the source's log under
// sources/<name>, and with one source the one folder there is its. "" otherwise: the log of
// source N is under sources/N (or sources/<id> in v2).
func namedSourceDir(ctx context.Context, store checkpoint.Store, o *Offsets) (string, error) {
	if o.Version != 1 || len(o.Sources) != 1 || !o.NamesSources() {
		return "", nil
	}
	keys, err := checkpoint.ListKeys(ctx, store, "sources/")
	if err != nil {
		return "", fmt.Errorf("list sources/: %w", err)
	}
	var dirs []string
	for _, k := range keys {
		if d, _, ok := strings.Cut(strings.TrimPrefix(k, "sources/"), "/"); ok && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) != 1 {
		return "", nil
	}
	return dirs[0], nil
}

// kindOfOffset infers a source's kind from its offset's JSON.
func kindOfOffset(off json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(off, &m) != nil {
		return ""
	}
	switch {
	case m["logOffset"] != nil:
		return "files"
	case m["reservoirId"] != nil:
		return "delta"
	}
	for _, v := range m {
		var parts map[string]int64
		if json.Unmarshal(v, &parts) != nil {
			return ""
		}
	}
	if len(m) > 0 {
		return "kafka"
	}
	return ""
}

func (c *Checkpoint) readOperators(ctx context.Context, store checkpoint.Store) error {
	keys, err := checkpoint.ListKeys(ctx, store, "state/")
	if err != nil {
		return fmt.Errorf("list state/: %w", err)
	}
	type files struct {
		v1      string
		v2      map[int64]string
		schemas map[string]string // store → newest schema file
	}
	ops := map[int64]*files{}
	op := func(id int64) *files {
		if ops[id] == nil {
			ops[id] = &files{v2: map[int64]string{}, schemas: map[string]string{}}
		}
		return ops[id]
	}
	for _, k := range keys {
		parts := strings.Split(strings.TrimPrefix(k, "state/"), "/")
		id, err := strconv.ParseInt(parts[0], 10, 64)
		if err != nil || len(parts) < 3 || strings.HasSuffix(k, ".crc") || strings.HasPrefix(path.Base(k), ".") {
			continue
		}
		switch {
		case parts[1] == "_metadata" && len(parts) == 3 && parts[2] == "metadata":
			op(id).v1 = k
		case parts[1] == "_metadata" && len(parts) == 4 && parts[2] == "v2":
			if b, err := strconv.ParseInt(parts[3], 10, 64); err == nil {
				op(id).v2[b] = k
			}
		case parts[1] == "_stateSchema" && len(parts) == 4:
			// _stateSchema/<store>/<batch>_<uuid>: the newest batch's wins.
			if cur, ok := op(id).schemas[parts[2]]; !ok || schemaBatch(k) >= schemaBatch(cur) {
				op(id).schemas[parts[2]] = k
			}
		case parts[1] == "0" && parts[len(parts)-2] == "_metadata" && parts[len(parts)-1] == "schema":
			// <part 0>/[<store>/]_metadata/schema (schema v1, v2).
			storeName := "default"
			if len(parts) == 5 {
				storeName = parts[2]
			}
			if _, ok := op(id).schemas[storeName]; !ok {
				op(id).schemas[storeName] = k
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(ops)) {
		f := ops[id]
		o := Operator{OperatorMetadata: OperatorMetadata{ID: id}, Schemas: map[string]StateSchema{}}
		key := f.v1
		if len(f.v2) > 0 {
			key = f.v2[slices.Max(slices.Collect(maps.Keys(f.v2)))]
		}
		if key != "" {
			data, err := store.Get(ctx, key)
			if err != nil {
				return fmt.Errorf("read %s: %w", key, err)
			}
			if o.OperatorMetadata, err = ParseOperatorMetadata(key, data); err != nil {
				return err
			}
		}
		for name, key := range f.schemas {
			data, err := store.Get(ctx, key)
			if err != nil {
				return fmt.Errorf("read %s: %w", key, err)
			}
			s, err := ParseStateSchema(key, data)
			if err != nil {
				return err
			}
			o.Schemas[name] = s
		}
		if s, ok := o.Schemas["default"]; ok && len(s.Families) > 0 {
			if o.Windows, err = readWindows(ctx, store, keys, id, s.Families[0].Key); err != nil {
				return err
			}
		}
		c.Operators = append(c.Operators, o)
	}
	return nil
}

// schemaBatch is the batch a _stateSchema file was written at: <batch>_<uuid>.
func schemaBatch(key string) int64 {
	b, _, _ := strings.Cut(path.Base(key), "_")
	n, _ := strconv.ParseInt(b, 10, 64)
	return n
}

// Batch is one retained batch: its offsets entry, and its commit once committed.
type Batch struct {
	ID      int64    `json:"id"`
	Offsets *Offsets `json:"offsets,omitempty"`
	Commit  *Commit  `json:"commit,omitempty"`
}

// Batches reads every retained batch of the offsets and commit logs, oldest first.
func Batches(ctx context.Context, store checkpoint.Store) ([]Batch, error) {
	planned, err := batches(ctx, store, "offsets/")
	if err != nil {
		return nil, err
	}
	committed, err := batches(ctx, store, "commits/")
	if err != nil {
		return nil, err
	}
	byID := map[int64]*Batch{}
	get := func(id int64) *Batch {
		if byID[id] == nil {
			byID[id] = &Batch{ID: id}
		}
		return byID[id]
	}
	for _, id := range planned {
		o, err := readLog(ctx, store, "offsets/", id, ParseOffsets)
		if err != nil {
			return nil, err
		}
		get(id).Offsets = &o
	}
	for _, id := range committed {
		c, err := readLog(ctx, store, "commits/", id, ParseCommit)
		if err != nil {
			return nil, err
		}
		get(id).Commit = &c
	}
	out := make([]Batch, 0, len(byID))
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		out = append(out, *byID[id])
	}
	return out, nil
}
