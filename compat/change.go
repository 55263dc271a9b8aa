package compat

import (
	"fmt"
	"strconv"
	"strings"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// change is what every rule looks at: the old shape, the new spec (defaulted) and its shape,
// with the lookups the rules share.
type change struct {
	old  Shape
	new  Shape
	err  error // why the new spec has no shape
	spec *v1.StreamingQuerySpec
	// out is what the caller read outside the spec and the shape.
	out outside
	// stop ends the chain after the current rule: nothing further can be judged.
	stop bool

	matched  *opMatch
	renames  []sourceRename
	renamesK bool
}

// sourcePath returns the path of the new spec's source name.
func (c *change) sourcePath(name string) string {
	for i := range c.spec.Sources {
		if c.spec.Sources[i].Name == name {
			return fmt.Sprintf("spec.sources[%d]", i)
		}
	}
	return "spec.sources"
}

// opPath returns the path of the new spec's stateful step at index i of c.new.Operators,
// as spec.transform[k].aggregate.
func (c *change) opPath(i int) string {
	ordinal := 0
	for k := range c.spec.Transform {
		st := &c.spec.Transform[k]
		if !st.Stateful() {
			continue
		}
		if ordinal == i {
			return fmt.Sprintf("spec.transform[%d].%s", k, st.Kind())
		}
		ordinal++
	}
	return "spec.transform"
}

// opStep returns the index in spec.transform of the stateful step at index i of
// c.new.Operators, or len(spec.transform).
func (c *change) opStep(i int) int {
	ordinal := 0
	for k := range c.spec.Transform {
		if c.spec.Transform[k].Stateful() {
			if ordinal == i {
				return k
			}
			ordinal++
		}
	}
	return len(c.spec.Transform)
}

// exprPath returns the path of the select expression that computes column before step k of
// the new spec, following copies and renames back to the first expression that computes
// something (else the earliest copy); "" when no select names it.
func (c *change) exprPath(column string, k int) string {
	last := ""
	for ; k > 0; k-- {
		st := &c.spec.Transform[k-1]
		for j, p := range st.Select {
			if p.Name != column {
				continue
			}
			last = fmt.Sprintf("spec.transform[%d].select[%d].expr", k-1, j)
			e := normExpr(p.Expr)
			if !identifier.MatchString(e) {
				return last
			}
			column = e
			break
		}
	}
	return last
}

// watermarkPath returns the path of the new spec's watermark step.
func (c *change) watermarkPath() string {
	for k := range c.spec.Transform {
		if c.spec.Transform[k].Watermark != nil {
			return fmt.Sprintf("spec.transform[%d].watermark", k)
		}
	}
	return "spec.transform"
}

// outputPath returns the path of the last step that decides the sink's columns.
func (c *change) outputPath() string {
	for k := len(c.spec.Transform) - 1; k >= 0; k-- {
		if st := &c.spec.Transform[k]; st.Select != nil || st.Aggregate != nil || st.Join != nil {
			return fmt.Sprintf("spec.transform[%d].%s", k, st.Kind())
		}
	}
	return "spec.sources"
}

// stateful reports whether state carries over: the old query kept state and the new one does.
func (c *change) stateful() bool { return c.old.Stateful() && c.new.Stateful() }

// sourceRename is a source whose name changed while its identity did not.
type sourceRename struct {
	old, new SourceShape
}

// sourceRenames returns the old sources that are gone while a new source of the same
// identity appeared under a new name.
func (c *change) sourceRenames() []sourceRename {
	if c.renamesK {
		return c.renames
	}
	c.renamesK = true
	taken := map[string]bool{}
	for _, o := range c.old.Sources {
		if _, ok := c.new.source(o.Name); ok {
			continue
		}
		for _, n := range c.new.Sources {
			if _, ok := c.old.source(n.Name); ok || taken[n.Name] || identity(n) != identity(o) {
				continue
			}
			taken[n.Name] = true
			c.renames = append(c.renames, sourceRename{old: o, new: n})
			break
		}
	}
	return c.renames
}

func (c *change) renamedFrom(oldName string) bool {
	for _, r := range c.sourceRenames() {
		if r.old.Name == oldName {
			return true
		}
	}
	return false
}

func (c *change) renamedTo(newName string) bool {
	for _, r := range c.sourceRenames() {
		if r.new.Name == newName {
			return true
		}
	}
	return false
}

// identity is what a source's offsets refer to.
func identity(s SourceShape) string {
	switch s.Kind {
	case v1.SourceFiles:
		return "files " + s.Format + " " + s.Path
	default:
		return describeSource(s)
	}
}

// opMatch pairs the old stateful steps with the new ones.
type opMatch struct {
	// pairs have the same id and kind: their keys, aggregates and windows are compared.
	pairs []opPair
	// renamed have different ids and the same kind, keys and aggregates.
	renamed []opPair
	// kind have the same id and different kinds.
	kind []opPair
	// added and removed are indexes into the new and old operators.
	added, removed []int
}

// pair is an old and a new item that stand for the same step, with their indexes.
type pair[T any] struct {
	oldIdx, newIdx int
	old, new       T
}

type opPair = pair[OperatorShape]

// pairUp pairs olds with news by each predicate in turn (an item pairs once, with the first
// unpaired match), returning the pairs of each predicate and the indexes of the news and olds
// left unpaired.
func pairUp[T any](olds, news []T, sames ...func(o, n T) bool) (pairs [][]pair[T], added, removed []int) {
	usedOld, usedNew := make([]bool, len(olds)), make([]bool, len(news))
	for _, same := range sames {
		var into []pair[T]
		for j, n := range news {
			if usedNew[j] {
				continue
			}
			for i, o := range olds {
				if !usedOld[i] && same(o, n) {
					usedOld[i], usedNew[j] = true, true
					into = append(into, pair[T]{oldIdx: i, newIdx: j, old: o, new: n})
					break
				}
			}
		}
		pairs = append(pairs, into)
	}
	for j := range news {
		if !usedNew[j] {
			added = append(added, j)
		}
	}
	for i := range olds {
		if !usedOld[i] {
			removed = append(removed, i)
		}
	}
	return pairs, added, removed
}

func (c *change) ops() *opMatch {
	if c.matched != nil {
		return c.matched
	}
	m := &opMatch{}
	var p [][]opPair
	p, m.added, m.removed = pairUp(c.old.Operators, c.new.Operators,
		func(o, n OperatorShape) bool { return o.ID == n.ID && o.Kind == n.Kind },
		func(o, n OperatorShape) bool { return describeOpContent(o) == describeOpContent(n) },
		func(o, n OperatorShape) bool { return o.ID == n.ID })
	m.pairs, m.renamed, m.kind = p[0], p[1], p[2]
	c.matched = m
	return m
}

// isOrdinal reports whether an operator id is an ordinal rather than a name.
func isOrdinal(id string) bool {
	_, err := strconv.Atoi(id)
	return err == nil
}

// revertOrFresh is the remedy of a rejected change: revert, or start fresh.
func (c *change) revertOrFresh(revert string) string {
	return revert + ", or " + c.freshStart() + "."
}

// freshStart says what starting fresh at a new checkpoint location means for this query.
func (c *change) freshStart() string {
	var starts []string
	for _, s := range c.new.Sources {
		starts = append(starts, s.Name+" "+startDesc(s))
	}
	state := ""
	if c.new.Stateful() {
		state = " and rebuilds its state"
	}
	return fmt.Sprintf("start fresh at a new spec.checkpoint.location: the query then reads %s%s, and %s",
		joinAnd(starts), state, freshSink(c.new.Sink, c.new.OutputMode))
}

// freshSink says what a fresh start means for the sink.
func freshSink(s SinkShape, mode v1.OutputMode) string {
	switch s.Kind {
	case v1.SinkDelta:
		if mode == v1.OutputComplete {
			return fmt.Sprintf("the Delta table %s is overwritten with the rebuilt result", s.Path)
		}
		if mode == v1.OutputUpdate {
			return fmt.Sprintf("the Delta table %s has its rows merged by key again, with results rebuilt from that data only", s.Path)
		}
		return fmt.Sprintf("the Delta table %s receives that data after the rows it already holds (use a new table to avoid duplicates)", s.Path)
	case v1.SinkPostgres:
		switch mode {
		case v1.OutputComplete:
			return fmt.Sprintf("the PostgreSQL table %s is overwritten with the rebuilt result", s.Table)
		case v1.OutputUpdate:
			return fmt.Sprintf("the PostgreSQL table %s has its rows upserted by key again, with results rebuilt from that data only", s.Table)
		}
		return fmt.Sprintf("the PostgreSQL table %s receives that data after the rows it already holds (use a new table to avoid duplicates)", s.Table)
	case v1.SinkFiles:
		return fmt.Sprintf("the folder %s receives that data next to the files it already holds (use an empty folder to avoid duplicates)", s.Path)
	case v1.SinkKafka:
		return fmt.Sprintf("Kafka topic %s receives that data after the records it already holds", s.Topic)
	case v1.SinkWebhook:
		return fmt.Sprintf("%s receives that data under new Idempotency-Keys, which the receiver cannot match with the batches it already received", s.URL)
	case v1.SinkConsole:
		return "the console prints it"
	}
	return "the sink receives that data"
}

// startDesc says where a source new to a checkpoint starts.
func startDesc(s SourceShape) string {
	switch s.Kind {
	case v1.SourceKafka:
		switch s.StartingOffsets {
		case v1.OffsetsEarliest:
			return "from its startingOffsets (earliest: every record still retained)"
		case v1.OffsetsLatest, "":
			return "from its startingOffsets (latest: only records produced from then on)"
		}
		return "from its startingOffsets " + s.StartingOffsets
	case v1.SourceFiles:
		return "from every file already in " + s.Path
	case v1.SourceDelta:
		if s.StartingVersion != nil {
			return fmt.Sprintf("from version %d of its table", *s.StartingVersion)
		}
		return "from its table's current content"
	case v1.SourceRate:
		return "from value 0"
	case v1.SourceNexmark:
		return "from event 0"
	}
	return "from its starting position"
}

func joinAnd(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

func joinOr(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}
