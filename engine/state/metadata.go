package state

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

// MetadataFormat is the version of the _metadata file this package writes.
const MetadataFormat = 1

// ErrIncompatible means the state in the checkpoint was written by an
// operator that computes something else (another kind, key, function,
// window or partition count): using it would give wrong results.
var ErrIncompatible = errors.New("state is incompatible with the operator")

// Metadata describes a stateful operator's state: state/<op>/_metadata. It
// is written once, with the operator's first state, and checked by every
// later Open.
type Metadata struct {
	FormatVersion int `json:"formatVersion"`
	// Operator is the operator's name in the checkpoint (its name, or its
	// ordinal among the stateful steps).
	Operator string `json:"operator"`
	// Kind is the step kind: aggregate or dropDuplicates.
	Kind string `json:"kind"`
	// Partitions is the number of partitions keys are hashed into.
	Partitions int `json:"partitions"`
	// KeySchema lists the columns of the key, in order.
	KeySchema []Field `json:"keySchema"`
	// ValueSchema lists the columns of the value, in order.
	ValueSchema []Field `json:"valueSchema,omitempty"`
	// Eviction names the event-time column by which the watermark evicts
	// state, "" when state is never evicted.
	Eviction string `json:"eviction,omitempty"`
	// Computes is a canonical description of what the operator computes;
	// Fingerprint is its SHA-256. Output names are not part of it, so a
	// renamed output column keeps the state.
	Computes    json.RawMessage `json:"computes,omitempty"`
	Fingerprint string          `json:"fingerprint"`
}

// Field is one column of a key or value schema.
type Field struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Function and Input describe an aggregate value: count(amount) is
	// Function count, Input amount.
	Function string `json:"function,omitempty"`
	Input    string `json:"input,omitempty"`
}

// Fingerprint returns the fingerprint of a canonical description of what an
// operator computes: "sha256:" and the hex SHA-256 of computes.
func Fingerprint(computes []byte) string {
	sum := sha256.Sum256(computes)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// writeMetadata records m, or checks it against the recorded metadata.
func writeMetadata(ctx context.Context, s checkpoint.Store, m Metadata) error {
	key := checkpoint.StateMetadataKey(m.Operator)
	m.FormatVersion = MetadataFormat
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	err = s.Create(ctx, key, append(data, '\n'))
	if err == nil {
		return nil
	}
	if !errors.Is(err, checkpoint.ErrExists) {
		return fmt.Errorf("write %s: %w", key, err)
	}
	old, err := ReadMetadata(ctx, s, m.Operator)
	if err != nil {
		return err
	}
	return compatible(old, m)
}

// ReadMetadata reads an operator's _metadata.
func ReadMetadata(ctx context.Context, s checkpoint.Store, op string) (Metadata, error) {
	key := checkpoint.StateMetadataKey(op)
	data, err := s.Get(ctx, key)
	if err != nil {
		return Metadata{}, fmt.Errorf("read %s: %w", key, err)
	}
	var m Metadata
	if err := json.Unmarshal(data, &m); err != nil {
		return Metadata{}, fmt.Errorf("read %s: %w: %w", key, checkpoint.ErrDamaged, err)
	}
	if m.FormatVersion > MetadataFormat {
		return Metadata{}, fmt.Errorf("read %s: format %d: %w", key, m.FormatVersion, checkpoint.ErrNewerFormat)
	}
	return m, nil
}

func compatible(old, cur Metadata) error {
	switch {
	case old.Kind != cur.Kind:
		return fmt.Errorf("%w: operator %s holds %s state, the query has a %s there; start with a new checkpoint location",
			ErrIncompatible, cur.Operator, old.Kind, cur.Kind)
	case old.Partitions != cur.Partitions:
		return fmt.Errorf("%w: operator %s has %d state partitions, not %d: the partition count is pinned by the checkpoint",
			ErrIncompatible, cur.Operator, old.Partitions, cur.Partitions)
	case old.Fingerprint != cur.Fingerprint:
		return fmt.Errorf("%w: operator %s computed %s, the query computes %s; revert the change or start with a new checkpoint location",
			ErrIncompatible, cur.Operator, old.Computes, cur.Computes)
	}
	return nil
}
