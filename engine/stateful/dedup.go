package stateful

import (
	"fmt"
	"math"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine/state"
)

var _ Operator = (*DropDuplicates)(nil)

// DropDuplicatesConfig describes a dropDuplicates step to NewDropDuplicates.
type DropDuplicatesConfig struct {
	// Name is the operator's name in the checkpoint (v1.Step.StatefulName).
	Name string
	Spec *v1.DropDuplicates
	// Input holds the columns flowing into the step.
	Input v1.Columns
	// EventTime is the event-time column in force at the step
	// (plan.Step.EventTime), "" when the query has no watermark before it.
	EventTime string
}

// DropDuplicates passes the first row of each distinct combination of its
// columns and drops the others; its state holds the combinations seen. With
// the event-time column among its columns, the watermark drops late rows and
// evicts the combinations it passed; otherwise state grows without bound.
type DropDuplicates struct {
	name     string
	cols     []int
	evictCol int // -1 when the watermark does not evict
	meta     state.Metadata
}

// NewDropDuplicates compiles a dropDuplicates step. The spec must be valid.
func NewDropDuplicates(cfg DropDuplicatesConfig) (*DropDuplicates, error) {
	d := &DropDuplicates{name: cfg.Name, evictCol: -1}
	type keyDesc struct {
		Column string `json:"column"`
		Type   string `json:"type"`
	}
	desc := struct {
		Kind     string    `json:"kind"`
		Format   int       `json:"format"`
		Keys     []keyDesc `json:"keys"`
		Eviction string    `json:"eviction,omitempty"`
	}{Kind: string(v1.StepDropDuplicates), Format: 1}
	var keySchema []state.Field
	for _, c := range cfg.Spec.Columns {
		i := columnIndex(cfg.Input, c)
		if i < 0 {
			return nil, fmt.Errorf("dropDuplicates %s: no column %q", cfg.Name, c)
		}
		d.cols = append(d.cols, i)
		t := string(cfg.Input[i].Type)
		desc.Keys = append(desc.Keys, keyDesc{c, t})
		keySchema = append(keySchema, state.Field{Name: c, Type: t})
		if cfg.EventTime != "" && c == cfg.EventTime && d.evictCol < 0 {
			d.evictCol = i
			desc.Eviction = c
		}
	}
	c := computes(desc)
	d.meta = state.Metadata{
		Operator:    cfg.Name,
		Kind:        string(v1.StepDropDuplicates),
		KeySchema:   keySchema,
		Eviction:    desc.Eviction,
		Computes:    c,
		Fingerprint: state.Fingerprint(c),
	}
	return d, nil
}

// Metadata describes the operator's state.
func (d *DropDuplicates) Metadata() state.Metadata { return d.meta }

// Evicts reports whether the watermark evicts state.
func (d *DropDuplicates) Evicts() bool { return d.evictCol >= 0 }

// Process passes the rows of the batch whose combination was not seen
// before, in input order, and records their combinations in st. When the
// watermark evicts, a row whose event time is at or behind the batch's
// late-event watermark is dropped as late, and the combinations at or behind
// the batch's watermark are evicted.
func (d *DropDuplicates) Process(st *state.Store, rows []Row, b Batch) ([]Row, Metrics, error) {
	var m Metrics
	parts := st.Partitions()
	wm, lateWm := b.watermarkNanos(), b.lateNanos()
	type item struct {
		row int
		key string
	}
	byPart := make([][]item, parts)
	keep := make([]bool, len(rows))
	buf := make([]byte, 0, 64)
	for i, r := range rows {
		buf = buf[:0]
		if d.evictCol >= 0 {
			ts, ok := nanos(r[d.evictCol])
			if !ok {
				ts = math.MaxInt64 // a null event time is never evicted
			}
			if ts <= lateWm {
				m.DroppedByWatermark++
				continue
			}
			buf = appendEvictTime(buf, ts)
		}
		for _, c := range d.cols {
			buf = appendValue(buf, r[c])
		}
		p := state.PartitionOf(buf, parts)
		byPart[p] = append(byPart[p], item{i, string(buf)})
	}
	err := st.Update(func(p *state.Partition) error {
		for _, it := range byPart[p.ID()] {
			if _, seen := p.Get(it.key); seen {
				continue
			}
			p.Put(it.key, nil)
			keep[it.row] = true
			if d.evictCol >= 0 {
				p.Hint = min(p.Hint, evictTime(it.key))
			}
		}
		if d.evictCol < 0 || wm < p.Hint {
			return nil
		}
		floor := int64(math.MaxInt64)
		for key := range p.All() {
			if t := evictTime(key); t > wm {
				floor = min(floor, t)
			} else {
				p.Delete(key)
			}
		}
		p.Hint = floor
		return nil
	})
	if err != nil {
		return nil, m, fmt.Errorf("dropDuplicates %s: %w", d.name, err)
	}
	out := rows[:0]
	for i, r := range rows {
		if keep[i] {
			out = append(out, r)
		}
	}
	clear(rows[len(out):])
	m.Emitted = int64(len(out))
	return out, m, nil
}
