package delta

import (
	"maps"
	"net/url"
	"slices"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// Snapshot is the state of a table at one version: its protocol, metadata,
// active files and application transactions. A Snapshot is never changed
// after it is returned, and is safe for concurrent use.
type Snapshot struct {
	// Version is the table version; -1 when the table has no commit yet.
	Version  int64
	Protocol Protocol
	Metadata Metadata

	files      map[string]*Add    // active files by path
	tombstones map[string]*Remove // removed files by path, until they expire
	txns       map[string]Txn     // newest transaction by application id
}

// emptySnapshot is the state before version 0.
func emptySnapshot() *Snapshot {
	return &Snapshot{Version: -1, files: map[string]*Add{}, tombstones: map[string]*Remove{}, txns: map[string]Txn{}}
}

// Exists reports whether the table has at least one commit.
func (s *Snapshot) Exists() bool { return s.Version >= 0 }

// Files returns the active data files, ordered by path.
func (s *Snapshot) Files() []Add {
	out := make([]Add, 0, len(s.files))
	for _, p := range slices.Sorted(maps.Keys(s.files)) {
		out = append(out, *s.files[p])
	}
	return out
}

// NumFiles returns how many data files are active.
func (s *Snapshot) NumFiles() int { return len(s.files) }

// TxnVersion returns the newest transaction version that application appID
// committed to the table, and whether it committed any.
func (s *Snapshot) TxnVersion(appID string) (int64, bool) {
	t, ok := s.txns[appID]
	return t.Version, ok
}

// Txns returns every application's newest transaction, ordered by appID.
func (s *Snapshot) Txns() []Txn {
	out := make([]Txn, 0, len(s.txns))
	for _, id := range slices.Sorted(maps.Keys(s.txns)) {
		out = append(out, s.txns[id])
	}
	return out
}

// Columns returns the table's columns, from its schema.
func (s *Snapshot) Columns() (v1.Columns, error) {
	if s.Metadata.SchemaString == "" {
		return nil, nil
	}
	return ParseSchema(s.Metadata.SchemaString)
}

// clone returns a copy whose maps may be changed.
func (s *Snapshot) clone() *Snapshot {
	c := *s
	c.files = maps.Clone(s.files)
	c.tombstones = maps.Clone(s.tombstones)
	c.txns = maps.Clone(s.txns)
	return &c
}

// apply changes s (a clone) by the actions of commit version, in order:
// an add revives a tombstone, a remove ends an add.
func (s *Snapshot) apply(version int64, actions []Action) {
	for _, a := range actions {
		switch {
		case a.Protocol != nil:
			s.Protocol = *a.Protocol
		case a.MetaData != nil:
			s.Metadata = *a.MetaData
		case a.Add != nil:
			p := canonicalPath(a.Add.Path)
			add := *a.Add
			s.files[p] = &add
			delete(s.tombstones, p)
		case a.Remove != nil:
			p := canonicalPath(a.Remove.Path)
			rm := *a.Remove
			delete(s.files, p)
			s.tombstones[p] = &rm
		case a.Txn != nil:
			s.txns[a.Txn.AppID] = *a.Txn
		}
	}
	s.Version = version
}

// expireTombstones drops tombstones deleted before cutoff; checkpoints keep
// only the rest.
func (s *Snapshot) expireTombstones(cutoff time.Time) {
	ms := cutoff.UnixMilli()
	for p, r := range s.tombstones {
		if r.DeletionTimestamp < ms {
			delete(s.tombstones, p)
		}
	}
}

// canonicalPath makes the two spellings of one file's path the same key
// (the protocol compares paths after URL-decoding).
func canonicalPath(p string) string {
	if u, err := url.PathUnescape(p); err == nil {
		return u
	}
	return p
}
