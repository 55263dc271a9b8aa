package compat

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// The checks of the join steps.

// joinMatch pairs the old joins with the new ones, as opMatch pairs the stateful steps.
type joinMatch struct {
	// pairs have the same id and kind (static or stream): their type, keys and sides are compared.
	pairs []joinPair
	// renamed have different ids and the same content.
	renamed []joinPair
	// kind have the same id and another kind.
	kind []joinPair
	// added and removed are indexes into the new and old joins.
	added, removed []int
}

type joinPair = pair[JoinShape]

func (c *change) joins() *joinMatch {
	m := &joinMatch{}
	var p [][]joinPair
	p, m.added, m.removed = pairUp(c.old.Joins, c.new.Joins,
		func(o, n JoinShape) bool { return o.ID == n.ID && joinKind(o) == joinKind(n) },
		func(o, n JoinShape) bool { return describeJoinContent(o) == describeJoinContent(n) },
		func(o, n JoinShape) bool { return o.ID == n.ID })
	m.pairs, m.renamed, m.kind = p[0], p[1], p[2]
	return m
}

// joinPath returns the path of the new spec's join at index i of c.new.Joins.
func (c *change) joinPath(i int) string {
	_, steps := c.spec.JoinNames()
	if i < len(steps) {
		return fmt.Sprintf("spec.transform[%d].join", steps[i])
	}
	return "spec.transform"
}

func joinKind(j JoinShape) string {
	if j.Stream != nil {
		return "stream"
	}
	return "static"
}

func describeJoin(j JoinShape) string {
	return fmt.Sprintf("%s join %s", joinKind(j), describeJoinID(j.ID))
}

// describeJoinID quotes a join's id; an unnamed join's is join-<n>.
func describeJoinID(id string) string { return strconv.Quote(id) }

func describeJoinSide(j JoinShape) string {
	switch {
	case j.Static != nil:
		switch j.Static.Kind {
		case v1.StaticFilesKind:
			return fmt.Sprintf("files (%s) in %s", j.Static.Format, j.Static.Path)
		case v1.StaticPostgresKind:
			return fmt.Sprintf("postgres table %s (%s)", j.Static.Path, j.Static.Connection)
		}
		return "delta table " + j.Static.Path
	case j.Stream != nil:
		return "source " + j.Stream.Source
	}
	return "?"
}

func describeJoinKeys(keys []JoinKeyShape) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s = %s", describeKey(k.Left), describeKey(k.Right))
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func describeTimeBound(j JoinShape) string {
	if j.Stream == nil {
		return ""
	}
	tb := j.Stream.TimeBound
	return fmt.Sprintf("%s BETWEEN %s - %s AND %s + %s", tb.RightColumn, tb.LeftColumn, tb.LowerBound, tb.LeftColumn, tb.UpperBound)
}

func describeRefresh(j JoinShape) string {
	if j.Static == nil || j.Static.Refresh == nil {
		return "never (the first snapshot is kept)"
	}
	if j.Static.Refresh.OnNewVersion {
		return "onNewVersion"
	}
	return "every " + string(j.Static.Refresh.Every)
}

// describeJoinContent is what a join computes, without its id.
func describeJoinContent(j JoinShape) string {
	s := fmt.Sprintf("%s %s join of %s on %s", j.Type, joinKind(j), describeJoinSide(j), describeJoinKeys(j.Keys))
	if j.Stream != nil {
		s += fmt.Sprintf(" where %s, right watermark %s", describeTimeBound(j), j.Stream.Watermark.Column)
	}
	return s
}

func checkJoinAdded(c *change) []Finding {
	var out []Finding
	for _, j := range c.joins().added {
		n := c.new.Joins[j]
		f := Finding{Path: c.joinPath(j), New: describeJoinContent(n)}
		switch {
		case n.Stream != nil:
			// A stream join is a stateful operator: its buffered rows start empty, whatever the
			// query kept before, and Spark refuses the restart (its state folder is missing).
			f.Severity = Rejected
			if c.old.Stateful() {
				f.Message = fmt.Sprintf("The %s is new in a query that keeps state: the state was built from unjoined rows, so from the restart on it would mix rows joined and not joined, and the join's own state would start empty.", describeJoin(n))
			} else {
				f.Message = fmt.Sprintf("The %s is new: it is a stateful operator whose state (the rows each side buffers) would start empty while the query continues from its offsets, so rows read before the restart would never be matched. Spark refuses such a restart too (the operator's state is missing).", describeJoin(n))
			}
			f.Remedy = c.revertOrFresh("Remove the join")
		case c.old.Stateful():
			// A static join keeps no state: like a filter, it shapes the rows from the next
			// batch on, and the state keeps what it built.
			f.Severity = Warning
			f.Message = fmt.Sprintf("The %s is new: rows are joined from the next batch on (a batch replayed at restart included), as a new filter applies from the restart on; the state keeps what it built from unjoined rows, and rows the sink already holds stay unjoined.", describeJoin(n))
			f.Remedy = "To join what the state was built from too, " + c.freshStart() + "."
		default:
			f.Severity = Warning
			f.Message = fmt.Sprintf("The %s is new: rows are joined from the next batch on (a batch replayed at restart included); rows the sink already holds stay unjoined.", describeJoin(n))
			f.Remedy = "To join the rows already written too, " + c.freshStart() + "."
		}
		out = append(out, f)
	}
	return out
}

func checkJoinRemoved(c *change) []Finding {
	var out []Finding
	for _, i := range c.joins().removed {
		o := c.old.Joins[i]
		f := Finding{Path: "spec.transform", Old: describeJoinContent(o)}
		switch {
		case o.Stream != nil:
			f.Severity = Rejected
			f.Message = fmt.Sprintf("The %s is removed from a query that keeps state: from the restart on the output would mix joined and unjoined rows, the outer rows still due would never come, and the join's state would stay in the checkpoint unused.", describeJoin(o))
			f.Remedy = c.revertOrFresh("Put the join back")
		case c.old.Stateful():
			f.Severity = Warning
			f.Message = fmt.Sprintf("The %s is removed: from the next batch on rows reach the stateful steps unjoined, as a removed filter applies from the restart on; the state keeps what it built from joined rows.", describeJoin(o))
			f.Remedy = "Put the join back if the state must not mix joined and unjoined rows, or " + c.freshStart() + "."
		default:
			f.Severity = Warning
			f.Message = fmt.Sprintf("The %s is removed: from the next batch on the sink receives the rows unjoined.", describeJoin(o))
			f.Remedy = "Put the join back if the sink's readers expect its columns."
		}
		out = append(out, f)
	}
	return out
}

// staticJoinChange is the finding of a static join whose type or keys changed: a static join
// keeps no state, so, like a changed filter, the change applies from the next batch on.
func (c *change) staticJoinChange(j JoinShape, path, what, old, new string) Finding {
	kept := "the rows the sink already holds"
	if c.old.Stateful() {
		kept = "the state and the rows the sink already holds"
	}
	return Finding{
		Severity: Warning,
		Path:     path,
		Old:      old,
		New:      new,
		Message: fmt.Sprintf("The %s of the %s changed from %s to %s; the join keeps no state, so, as a changed filter, the change applies from the next batch on (a batch replayed at restart joins the new way too, against the snapshot it recorded); %s were joined the old way.",
			what, describeJoin(j), old, new, kept),
		Remedy: fmt.Sprintf("Revert %s to %s if the output must not mix both, or %s.", what, old, c.freshStart()),
	}
}

func checkJoinRenamed(c *change) []Finding {
	var out []Finding
	for _, p := range c.joins().renamed {
		f := Finding{Path: c.joinPath(p.newIdx) + ".name", Old: describeJoinID(p.old.ID), New: describeJoinID(p.new.ID)}
		revert := fmt.Sprintf("Name it %q again", p.old.ID)
		if strings.HasPrefix(p.old.ID, "join-") {
			revert = fmt.Sprintf("Restore its id %s (remove its name, or the joins added or removed before it)", describeJoinID(p.old.ID))
		}
		if p.new.Stream != nil {
			f.Severity = Rejected
			f.Message = fmt.Sprintf("The %s is now %s; its state is stored under the join's id, so under the new id it would start empty and miss the matches and outer rows of the rows it buffered.",
				describeJoin(p.old), describeJoinID(p.new.ID))
			f.Remedy = c.revertOrFresh(revert)
		} else {
			f.Severity = Warning
			f.Message = fmt.Sprintf("The %s is now %s; its snapshot record is kept under the id, so the next batch reads a new snapshot of %s.",
				describeJoin(p.old), describeJoinID(p.new.ID), describeJoinSide(p.new))
			f.Remedy = revert + " to keep joining against the recorded snapshot until its refresh is due."
		}
		out = append(out, f)
	}
	return out
}

var joinKindChange = fieldRule[JoinShape]{
	pairs: func(c *change, fn func(o, n JoinShape, at string)) {
		for _, p := range c.joins().kind {
			fn(p.old, p.new, c.joinPath(p.newIdx))
		}
	},
	value:    func(j JoinShape) string { return joinKind(j) + " join of " + describeJoinSide(j) },
	severity: Rejected,
	message: func(_ *change, d diff[JoinShape]) string {
		return fmt.Sprintf("Join %s changed from a %s join to a %s join; the checkpoint holds a %s join's record under that id, which means nothing to a %s join.",
			describeJoinID(d.n.ID), joinKind(d.o), joinKind(d.n), joinKind(d.o), joinKind(d.n))
	},
	remedy: func(c *change, d diff[JoinShape]) string {
		return c.revertOrFresh("Revert the join to a " + joinKind(d.o) + " join")
	},
}

func checkJoinType(c *change) []Finding {
	var out []Finding
	for _, p := range c.joins().pairs {
		if p.old.Type == p.new.Type {
			continue
		}
		if p.new.Static != nil {
			out = append(out, c.staticJoinChange(p.new, c.joinPath(p.newIdx)+".type", "type", string(p.old.Type), string(p.new.Type)))
			continue
		}
		out = append(out, Finding{
			Severity: Rejected,
			Path:     c.joinPath(p.newIdx) + ".type",
			Old:      string(p.old.Type),
			New:      string(p.new.Type),
			Message: fmt.Sprintf("The %s changed from %s to %s; the rows already written (and a stream join's buffered rows, whose outer rows are still due) were joined the old way, so the output would change meaning mid-stream.",
				describeJoin(p.new), p.old.Type, p.new.Type),
			Remedy: c.revertOrFresh("Revert type to " + string(p.old.Type)),
		})
	}
	return out
}

func checkJoinKeys(c *change) []Finding {
	var out []Finding
	for _, p := range c.joins().pairs {
		o, n := describeJoinKeys(p.old.Keys), describeJoinKeys(p.new.Keys)
		if o == n {
			continue
		}
		if p.new.Static != nil {
			out = append(out, c.staticJoinChange(p.new, c.joinPath(p.newIdx)+".keys", "keys", o, n))
			continue
		}
		why := ""
		if sameKeySet(p.old.Keys, p.new.Keys) {
			why = " order"
		}
		out = append(out, Finding{
			Severity: Rejected,
			Path:     c.joinPath(p.newIdx) + ".keys",
			Old:      o,
			New:      n,
			Message:  joinKeysMessage(p.new, why),
			Remedy:   c.revertOrFresh("Restore keys to " + o),
		})
	}
	return out
}

func joinKeysMessage(j JoinShape, why string) string {
	return fmt.Sprintf("The keys of %s changed%s; they are its state key, in order, so the rows it buffered would never be found again.", describeJoin(j), why)
}

func sameKeySet(a, b []JoinKeyShape) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, k := range a {
		seen[describeKey(k.Left)+"="+describeKey(k.Right)]++
	}
	for _, k := range b {
		seen[describeKey(k.Left)+"="+describeKey(k.Right)]--
	}
	for _, v := range seen {
		if v != 0 {
			return false
		}
	}
	return true
}

var joinSide = fieldRule[JoinShape]{
	pairs: (*change).joinPairs,
	fieldOf: func(_, n JoinShape) string {
		if n.Stream != nil {
			return ".stream.source"
		}
		return ".static"
	},
	value: describeJoinSide,
	// A static join keeps no state: like a changed filter, another table applies from the
	// next batch on. A stream join's buffered rows came from the old source.
	severityOf: func(_, n JoinShape) Severity {
		if n.Static != nil {
			return Warning
		}
		return Rejected
	},
	message: func(c *change, d diff[JoinShape]) string {
		if d.n.Static != nil {
			kept := "the rows the sink already holds"
			if c.old.Stateful() {
				kept = "the state and the rows the sink already holds"
			}
			return fmt.Sprintf("The %s now joins %s instead of %s; the join keeps no state, so, as a changed filter, the change applies from the next batch on: it reads a snapshot of %s then, and %s were joined with %s (a batch planned before the change and replayed after it joins the newest snapshot of %s, since the one it recorded is of %s).",
				describeJoin(d.n), d.new, d.old, d.new, kept, d.old, d.new, d.old)
		}
		return fmt.Sprintf("The %s now joins %s instead of %s; the right rows it recorded came from %s, and the rows already written were joined with it.",
			describeJoin(d.n), d.new, d.old, d.old)
	},
	remedy: func(c *change, d diff[JoinShape]) string {
		if d.n.Static != nil {
			return fmt.Sprintf("Join with %s again if the output must not mix both, or %s.", d.old, c.freshStart())
		}
		return c.revertOrFresh("Join with " + d.old + " again (a new join may read " + d.new + ")")
	},
}

// joinPairs calls fn for every join in both shapes under the same id and kind, with the path
// of the new join.
func (c *change) joinPairs(fn func(o, n JoinShape, at string)) {
	for _, p := range c.joins().pairs {
		fn(p.old, p.new, c.joinPath(p.newIdx))
	}
}

func checkJoinSideTransform(c *change) []Finding {
	var out []Finding
	for _, p := range c.joins().pairs {
		if p.old.Stream == nil || p.new.Stream == nil || p.old.Stream.Source != p.new.Stream.Source {
			continue
		}
		o, n := p.old.Stream, p.new.Stream
		// Without a transform on either side, the right columns are the source's, which the
		// source rules judge.
		colsChanged := o.Columns != nil && (len(o.Transform) > 0 || len(n.Transform) > 0) && !slices.Equal(o.Columns, n.Columns)
		if slices.Equal(o.Transform, n.Transform) && !colsChanged {
			continue
		}
		f := Finding{
			Severity: Warning,
			Path:     c.joinPath(p.newIdx) + ".stream.transform",
			Old:      describeSideTransform(o.Transform),
			New:      describeSideTransform(n.Transform),
			Message: fmt.Sprintf("The right side of the %s is now %s instead of %s; the right rows already buffered passed the old transform and keep its values, so until the watermark evicts them, matches with them follow the old transform and new right rows the new one.",
				describeJoin(p.new), describeSideTransform(n.Transform), describeSideTransform(o.Transform)),
			Remedy: "Accept the mix for up to the time bound, or revert the transform.",
		}
		if colsChanged {
			f.Severity = Rejected
			f.Old, f.New = describeColumns(o.Columns), describeColumns(n.Columns)
			f.Message = fmt.Sprintf("The right side of the %s now yields the columns %s instead of %s; its buffered right rows hold the old columns, so they no longer fit the join (the engine refuses the state).",
				describeJoin(p.new), describeColumns(n.Columns), describeColumns(o.Columns))
			f.Remedy = c.revertOrFresh("Restore the right side's columns " + describeColumns(o.Columns))
		}
		out = append(out, f)
	}
	return out
}

func describeSideTransform(steps []string) string {
	if len(steps) == 0 {
		return "the source's rows as read"
	}
	return "[" + strings.Join(steps, "; ") + "]"
}

var joinTimeBound = fieldRule[JoinShape]{
	pairs: (*change).joinPairs, when: bothJoins(JoinShape.isStream), field: ".stream.timeBound",
	same: func(o, n JoinShape) bool {
		ot, nt := o.Stream.TimeBound, n.Stream.TimeBound
		return ot.LeftColumn == nt.LeftColumn && ot.RightColumn == nt.RightColumn && sameDuration(ot.LowerBound, nt.LowerBound) && sameDuration(ot.UpperBound, nt.UpperBound)
	},
	value: describeTimeBound, severity: Rejected,
	message: func(_ *change, d diff[JoinShape]) string {
		return fmt.Sprintf("The %s's time bound changed; the rows it buffered were kept, and evicted with their outer rows, by the old bound, so matches and outer rows around the restart would follow neither bound.",
			describeJoin(d.n))
	},
	remedy: func(c *change, d diff[JoinShape]) string { return c.revertOrFresh("Restore the time bound " + d.old) },
}

// bothJoins returns a fieldRule.when that holds when is reports true of both joins.
func bothJoins(is func(JoinShape) bool) func(o, n JoinShape) bool {
	return func(o, n JoinShape) bool { return is(o) && is(n) }
}

func checkJoinWatermark(c *change) []Finding {
	var out []Finding
	for _, p := range c.joins().pairs {
		if p.old.Stream == nil || p.new.Stream == nil {
			continue
		}
		ow, nw := p.old.Stream.Watermark, p.new.Stream.Watermark
		path := c.joinPath(p.newIdx) + ".stream.watermark"
		switch {
		case ow.Column != nw.Column:
			out = append(out, Finding{
				Severity: Rejected,
				Path:     path + ".column",
				Old:      ow.Column,
				New:      nw.Column,
				Message: fmt.Sprintf("The right watermark of %s moved from %s to %s; the right rows it buffered are keyed and evicted by %s.",
					describeJoin(p.new), ow.Column, nw.Column, ow.Column),
				Remedy: c.revertOrFresh("Restore the right watermark column " + ow.Column),
			})
		case !sameDuration(ow.Delay, nw.Delay):
			out = append(out, Finding{
				Severity: Warning,
				Path:     path + ".delay",
				Old:      string(ow.Delay),
				New:      string(nw.Delay),
				Message: fmt.Sprintf("The right watermark delay of %s changed from %s to %s; like the query's watermark it never moves back, so the new delay decides which right rows are late, and when buffered rows are evicted, from the next batch on.",
					describeJoin(p.new), ow.Delay, nw.Delay),
				Remedy: fmt.Sprintf("Revert %s.delay to %s if that is not what you want.", path, ow.Delay),
			})
		}
	}
	return out
}

var joinRefresh = fieldRule[JoinShape]{
	pairs: (*change).joinPairs, when: bothJoins(JoinShape.isStatic), field: ".static.refresh",
	value: describeRefresh, severity: Allowed,
	message: func(_ *change, d diff[JoinShape]) string {
		return fmt.Sprintf("The %s's refresh policy changed; it decides only when a newer snapshot is read, from the next newly planned batch on (a replayed batch keeps its recorded snapshot).",
			describeJoin(d.n))
	},
}

func (j JoinShape) isStream() bool { return j.Stream != nil }
func (j JoinShape) isStatic() bool { return j.Static != nil }
