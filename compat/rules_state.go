package compat

import (
	"fmt"
	"slices"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/plan"
)

// The checks of the stateful steps and the watermark.

func checkOperatorAdded(c *change) []Finding {
	var out []Finding
	for _, j := range c.ops().added {
		n := c.new.Operators[j]
		out = append(out, Finding{
			Severity: Rejected,
			Path:     c.opPath(j),
			New:      describeOp(n) + " by " + describeKeys(n.Keys),
			Message: fmt.Sprintf("A %s step was added (the %s); it would start with empty state while the sources continue from their offsets, so its results would silently leave out every row read before the restart.",
				n.Kind, describeOp(n)),
			Remedy: c.revertOrFresh("Remove the step"),
		})
	}
	return out
}

func checkOperatorRemoved(c *change) []Finding {
	var out []Finding
	for _, i := range c.ops().removed {
		o := c.old.Operators[i]
		effect := "the sink would switch mid-stream from its groups to the rows it used to aggregate"
		if o.Kind == v1.StepDropDuplicates {
			effect = "rows it would have dropped as repeats of rows seen before the restart would reach the sink"
		}
		out = append(out, Finding{
			Severity: Rejected,
			Path:     "spec.transform",
			Old:      describeOp(o) + " by " + describeKeys(o.Keys),
			Message:  fmt.Sprintf("The %s is removed; %s, and its state would stay in the checkpoint unused.", describeOp(o), effect),
			Remedy:   c.revertOrFresh("Put the step back"),
		})
	}
	return out
}

func checkOperatorRenamed(c *change) []Finding {
	var out []Finding
	for _, p := range c.ops().renamed {
		var revert string
		switch {
		case isOrdinal(p.old.ID) && isOrdinal(p.new.ID):
			revert = fmt.Sprintf("Restore the stateful steps before it, so that it is #%s again", p.old.ID)
		case isOrdinal(p.old.ID):
			revert = fmt.Sprintf("Remove its name, so that it is stored as #%s again", p.old.ID)
		default:
			revert = fmt.Sprintf("Name it %q again", p.old.ID)
		}
		why := ""
		if isOrdinal(p.old.ID) && isOrdinal(p.new.ID) {
			why = " because a stateful step before it was added or removed"
		}
		out = append(out, Finding{
			Severity: Rejected,
			Path:     c.opPath(p.newIdx) + ".name",
			Old:      describeID(p.old.ID),
			New:      describeID(p.new.ID),
			Message: fmt.Sprintf("The %s is now %s%s; its state is stored under the step's id (its name, else its ordinal among the stateful steps), so under the new id it would start empty.",
				describeOp(p.old), describeID(p.new.ID), why),
			Remedy: c.revertOrFresh(revert),
		})
	}
	return out
}

func checkOperatorReordered(c *change) []Finding {
	pairs := slices.Clone(c.ops().pairs)
	slices.SortFunc(pairs, func(a, b opPair) int { return a.newIdx - b.newIdx })
	inOrder := slices.IsSortedFunc(pairs, func(a, b opPair) int { return a.oldIdx - b.oldIdx })
	if inOrder {
		return nil
	}
	var olds, news []string
	for _, p := range pairs {
		news = append(news, describeID(p.new.ID))
	}
	slices.SortFunc(pairs, func(a, b opPair) int { return a.oldIdx - b.oldIdx })
	for _, p := range pairs {
		olds = append(olds, describeID(p.old.ID))
	}
	return []Finding{{
		Severity: Rejected,
		Path:     "spec.transform",
		Old:      describeList(olds),
		New:      describeList(news),
		Message: fmt.Sprintf("The stateful steps now run in the order %s instead of %s; each step's state was built from the rows the steps before it let through, so a new order changes what every state means.",
			describeList(news), describeList(olds)),
		Remedy: c.revertOrFresh("Restore the order " + describeList(olds)),
	}}
}

var operatorKind = fieldRule[OperatorShape]{
	pairs: func(c *change, fn func(o, n OperatorShape, at string)) {
		for _, p := range c.ops().kind {
			fn(p.old, p.new, c.opPath(p.newIdx))
		}
	},
	value:    func(op OperatorShape) string { return string(op.Kind) },
	severity: Rejected,
	message: func(_ *change, d diff[OperatorShape]) string {
		return fmt.Sprintf("Stateful step %s changed from %s to %s; the checkpoint holds %s state under that id, which cannot be read as %s state.",
			describeID(d.n.ID), d.old, d.new, d.old, d.new)
	},
	remedy: func(c *change, d diff[OperatorShape]) string { return c.revertOrFresh("Revert the step to " + d.old) },
}

// keysPath is the path of a stateful step's key list.
func (c *change) keysPath(p opPair) string {
	if p.new.Kind == v1.StepDropDuplicates {
		return c.opPath(p.newIdx) + ".columns"
	}
	return c.opPath(p.newIdx) + ".groupBy"
}

func keyNoun(k v1.StepKind) string {
	if k == v1.StepDropDuplicates {
		return "columns"
	}
	return "grouping keys"
}

var keyColumnsChange = fieldRule[OperatorShape]{
	pairs: (*change).stepKeyLists,
	same: func(o, n OperatorShape) bool {
		on, nn := keyNames(o.Keys), keyNames(n.Keys)
		return slices.Equal(on, nn) || sameKeyNames(on, nn)
	},
	value: func(op OperatorShape) string { return describeKeys(op.Keys) }, severity: Rejected,
	message: func(_ *change, d diff[OperatorShape]) string {
		why := "its state is stored by key, so the groups already in it would never be updated again and new groups would start from zero"
		if d.n.Kind == v1.StepDropDuplicates {
			why = "its state remembers the rows seen by the old columns, so rows seen before the restart would pass again as new, even where the columns' types match"
		}
		return fmt.Sprintf("The %s of the %s changed from %s to %s; %s.", keyNoun(d.n.Kind), describeOp(d.n), d.old, d.new, why)
	},
	remedy: revertField[OperatorShape],
}

var keyOrder = fieldRule[OperatorShape]{
	pairs: (*change).stepKeyLists,
	when:  func(o, n OperatorShape) bool { return sameKeyNames(keyNames(o.Keys), keyNames(n.Keys)) },
	same:  func(o, n OperatorShape) bool { return slices.Equal(keyNames(o.Keys), keyNames(n.Keys)) },
	value: func(op OperatorShape) string { return describeKeys(op.Keys) }, severity: Rejected,
	message: func(_ *change, d diff[OperatorShape]) string {
		return fmt.Sprintf("The %s of the %s are now in the order %s instead of %s; the order is part of the state key, so no key already in the state would be found again.",
			keyNoun(d.n.Kind), describeOp(d.n), describeList(keyNames(d.n.Keys)), describeList(keyNames(d.o.Keys)))
	},
	remedy: func(c *change, d diff[OperatorShape]) string {
		return c.revertOrFresh("Restore the order " + describeList(keyNames(d.o.Keys)))
	},
}

// stepKeyLists pairs the stateful steps matched by id and kind, with the path of the new
// step's key list.
func (c *change) stepKeyLists(fn func(o, n OperatorShape, at string)) {
	for _, p := range c.ops().pairs {
		fn(p.old, p.new, c.keysPath(p))
	}
}

// sameKeyNames reports whether two key lists hold the same names, in any order.
func sameKeyNames(o, n []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(o)), slices.Sorted(slices.Values(n)))
}

// keyPairs calls fn for every key position of the paired steps whose key lists have the same
// names in the same order, with the path of the new key.
func (c *change) keyPairs(fn func(p opPair, o, n KeyShape, path string)) {
	for _, p := range c.ops().pairs {
		if !slices.Equal(keyNames(p.old.Keys), keyNames(p.new.Keys)) {
			continue
		}
		for j := range p.new.Keys {
			fn(p, p.old.Keys[j], p.new.Keys[j], fmt.Sprintf("%s[%d]", c.keysPath(p), j))
		}
	}
}

// stepKey is a key with its stateful step.
type stepKey struct {
	op  OperatorShape
	key KeyShape
}

// stepKeys is keyPairs for a fieldRule.
func (c *change) stepKeys(fn func(o, n stepKey, at string)) {
	c.keyPairs(func(p opPair, o, n KeyShape, path string) { fn(stepKey{p.old, o}, stepKey{p.new, n}, path) })
}

var keyType = fieldRule[stepKey]{
	pairs: (*change).stepKeys, when: func(o, _ stepKey) bool { return o.key.Window == nil },
	same: func(o, n stepKey) bool { return o.key.Type == n.key.Type },
	fieldOf: func(_, n stepKey) string {
		if n.op.Kind == v1.StepAggregate {
			return ".column"
		}
		return ""
	},
	value: func(k stepKey) string { return describeKey(k.key) }, severity: Rejected,
	message: func(_ *change, d diff[stepKey]) string {
		return fmt.Sprintf("Key column %s of the %s changed type from %s to %s; keys are stored encoded by type, so the keys already in the state would never match again.",
			d.n.key.Column, describeOp(d.n.op), d.o.key.Type, d.n.key.Type)
	},
	remedy: func(c *change, d diff[stepKey]) string {
		return c.revertOrFresh(fmt.Sprintf("Revert the change that made %s a %s column (in a source's schema or a select)", d.n.key.Column, d.n.key.Type))
	},
}

var windowColumn = fieldRule[stepKey]{
	pairs: (*change).stepKeys, when: windowed, field: ".window.column",
	value: func(k stepKey) string { return k.key.Window.Column }, severity: Rejected,
	message: func(_ *change, d diff[stepKey]) string {
		return fmt.Sprintf("The window of the %s now takes event time from %s instead of %s; the windows in its state were assigned by %s, so rows would be added to windows of another clock.",
			describeOp(d.n.op), d.new, d.old, d.old)
	},
	remedy: revertField[stepKey],
}

var windowSize = fieldRule[stepKey]{
	pairs: (*change).stepKeys, when: windowed, field: ".window.duration",
	same:  func(o, n stepKey) bool { return sameDuration(o.key.Window.Duration, n.key.Window.Duration) },
	value: func(k stepKey) string { return string(k.key.Window.Duration) }, severity: Rejected,
	message: func(_ *change, d diff[stepKey]) string {
		return fmt.Sprintf("The windows of the %s are now %s long instead of %s; its state holds %s windows, so the output would mix windows of both lengths and the open ones would never be completed (Spark lets this pass, since the types match).",
			describeOp(d.n.op), d.new, d.old, d.old)
	},
	remedy: revertField[stepKey],
}

var windowSlide = fieldRule[stepKey]{
	pairs: (*change).stepKeys, when: windowed, field: ".window.slide",
	same: func(o, n stepKey) bool {
		ow, nw := o.key.Window, n.key.Window
		return (ow.Slide == "") == (nw.Slide == "") && sameDuration(ow.Slide, nw.Slide)
	},
	value: func(k stepKey) string { return describeSlide(*k.key.Window) }, severity: Rejected,
	message: func(_ *change, d diff[stepKey]) string {
		return fmt.Sprintf("The windows of the %s now start %s instead of %s; every row in the state was added to the windows of the old slide, so open windows would miss rows or count them twice.",
			describeOp(d.n.op), d.new, d.old)
	},
	remedy: func(c *change, d diff[stepKey]) string {
		if d.o.key.Window.Slide == "" {
			return c.revertOrFresh("Remove " + d.path)
		}
		return c.revertOrFresh("Revert " + d.path + " to " + string(d.o.key.Window.Slide))
	},
}

var sessionColumn = fieldRule[stepKey]{
	pairs: (*change).stepKeys, when: func(o, _ stepKey) bool { return o.key.Session != nil }, field: ".session.column",
	value: func(k stepKey) string { return k.key.Session.Column }, severity: Rejected,
	message: func(_ *change, d diff[stepKey]) string {
		return fmt.Sprintf("The sessions of the %s now take event time from %s instead of %s; the open sessions in its state span times of %s, so rows would extend or merge sessions by another clock.",
			describeOp(d.n.op), d.new, d.old, d.old)
	},
	remedy: revertField[stepKey],
}

var sessionGap = fieldRule[stepKey]{
	pairs: (*change).stepKeys, when: func(o, _ stepKey) bool { return o.key.Session != nil },
	same: func(o, n stepKey) bool {
		os, ns := o.key.Session, n.key.Session
		return os.GapExpr == ns.GapExpr && sameDuration(os.Gap, ns.Gap)
	},
	fieldOf: func(_, n stepKey) string { return gapField(*n.key.Session) },
	value:   func(k stepKey) string { return describeGap(*k.key.Session) }, severity: Rejected,
	message: func(_ *change, d diff[stepKey]) string {
		return fmt.Sprintf("The sessions of the %s now close %s after their newest row instead of %s; each open session in its state ends at its newest row plus the old gap and was merged by it, so open sessions would close at the wrong time and some would hold rows the new gap keeps apart.",
			describeOp(d.n.op), d.new, d.old)
	},
	remedy: func(c *change, d diff[stepKey]) string {
		return c.revertOrFresh(fmt.Sprintf("Revert %s%s to %s", d.at, gapField(*d.o.key.Session), d.old))
	},
}

// gapField is the field that sets a session's gap.
func gapField(s SessionShape) string {
	if s.GapExpr != "" {
		return ".session.gapExpr"
	}
	return ".session.gap"
}

// windowed is a fieldRule.when that holds for the keys of a window.
func windowed(o, _ stepKey) bool { return o.key.Window != nil }

func describeSlide(w WindowShape) string {
	if w.Slide == "" {
		return "every " + string(w.Duration) + " (tumbling)"
	}
	return "every " + string(w.Slide)
}

// aggPairs calls fn for every aggregate position of the paired aggregate steps whose lists
// have the same length, with the path of the new aggregate.
func (c *change) aggPairs(fn func(p opPair, o, n AggregateShape, path string)) {
	for _, p := range c.ops().pairs {
		if p.new.Kind != v1.StepAggregate || len(p.old.Aggregates) != len(p.new.Aggregates) {
			continue
		}
		for j := range p.new.Aggregates {
			fn(p, p.old.Aggregates[j], p.new.Aggregates[j], fmt.Sprintf("%s.aggregates[%d]", c.opPath(p.newIdx), j))
		}
	}
}

// stepAgg is an aggregate with its stateful step.
type stepAgg struct {
	op  OperatorShape
	agg AggregateShape
}

// stepAggs is aggPairs for a fieldRule.
func (c *change) stepAggs(fn func(o, n stepAgg, at string)) {
	c.aggPairs(func(p opPair, o, n AggregateShape, path string) { fn(stepAgg{p.old, o}, stepAgg{p.new, n}, path) })
}

var aggregateFunction = fieldRule[stepAgg]{
	pairs: (*change).stepAggs, field: ".function",
	same:  func(o, n stepAgg) bool { return o.agg.Function == n.agg.Function },
	value: func(a stepAgg) string { return describeAgg(a.agg) }, severity: Rejected,
	message: func(_ *change, d diff[stepAgg]) string {
		o, n := d.o.agg, d.n.agg
		return fmt.Sprintf("Aggregate column %s of the %s changed from %s to %s; its state holds a partial %s for every group, which %s would silently continue as if it were its own (Spark lets this pass when the types match).",
			n.Name, describeOp(d.n.op), o.Function, n.Function, o.Function, n.Function)
	},
	remedy: func(c *change, d diff[stepAgg]) string {
		return c.revertOrFresh(fmt.Sprintf("Revert %s to %s", d.path, d.o.agg.Function))
	},
}

var aggregateInput = fieldRule[stepAgg]{
	pairs: (*change).stepAggs, when: sameFunction, field: ".column",
	same:  func(o, n stepAgg) bool { return o.agg.Column == n.agg.Column },
	value: func(a stepAgg) string { return describeAgg(a.agg) }, severity: Rejected,
	message: func(_ *change, d diff[stepAgg]) string {
		o, n := d.o.agg, d.n.agg
		return fmt.Sprintf("Aggregate column %s of the %s now aggregates %s instead of %s; its state holds %s over %s for every group, so each group would silently mix both inputs.",
			n.Name, describeOp(d.n.op), describeInput(n), describeInput(o), o.Function, describeInput(o))
	},
	remedy: func(c *change, d diff[stepAgg]) string {
		if d.o.agg.Column == "" {
			return c.revertOrFresh("Remove " + d.path)
		}
		return c.revertOrFresh("Revert " + d.path + " to " + d.o.agg.Column)
	},
}

var aggregateInputType = fieldRule[stepAgg]{
	pairs: (*change).stepAggs, when: sameInput, field: ".column",
	same:  func(o, n stepAgg) bool { return o.agg.Type == n.agg.Type },
	value: func(a stepAgg) string { return describeAgg(a.agg) }, severity: Rejected,
	message: func(_ *change, d diff[stepAgg]) string {
		o, n := d.o.agg, d.n.agg
		return fmt.Sprintf("The input %s of aggregate column %s in the %s changed type from %s to %s; its state holds %s partial results, which cannot be continued as %s.",
			n.Column, n.Name, describeOp(d.n.op), o.Type, n.Type, o.Type, n.Type)
	},
	remedy: func(c *change, d diff[stepAgg]) string {
		return c.revertOrFresh(fmt.Sprintf("Revert the change that made %s a %s column (in a source's schema or a select)", d.n.agg.Column, d.n.agg.Type))
	},
}

var aggregateRenamed = fieldRule[stepAgg]{
	pairs: (*change).stepAggs, when: sameInput, field: ".name",
	value: func(a stepAgg) string { return a.agg.Name }, severity: Warning,
	message: func(_ *change, d diff[stepAgg]) string {
		return fmt.Sprintf("Aggregate column %s of the %s is now named %s; its state is unaffected, since values are stored in order and not by name, but the sink receives the column as %s from the next batch.",
			d.old, describeOp(d.n.op), d.new, d.new)
	},
	remedy: func(_ *change, d diff[stepAgg]) string {
		return fmt.Sprintf("Revert %s to %s if readers of the sink expect it.", d.path, d.old)
	},
}

// sameFunction is a fieldRule.when that holds for aggregates of the same function.
func sameFunction(o, n stepAgg) bool { return o.agg.Function == n.agg.Function }

// sameInput is a fieldRule.when that holds for aggregates of the same function and input.
func sameInput(o, n stepAgg) bool { return sameFunction(o, n) && o.agg.Column == n.agg.Column }

// aggregateDiff matches the aggregates of a paired step whose lists differ in length by
// their function and input, in order, and returns the unmatched ones on each side.
func aggregateDiff(p opPair) (removed, added []int) {
	sig := func(a AggregateShape) string { return describeFunc(a) }
	inOld, inNew := lcs(p.old.Aggregates, p.new.Aggregates, sig)
	for i, ok := range inOld {
		if !ok {
			removed = append(removed, i)
		}
	}
	for j, ok := range inNew {
		if !ok {
			added = append(added, j)
		}
	}
	return removed, added
}

func checkAggregateAdded(c *change) []Finding {
	var out []Finding
	for _, p := range c.ops().pairs {
		if p.new.Kind != v1.StepAggregate || len(p.old.Aggregates) == len(p.new.Aggregates) {
			continue
		}
		_, added := aggregateDiff(p)
		for _, j := range added {
			a := p.new.Aggregates[j]
			path := fmt.Sprintf("%s.aggregates[%d]", c.opPath(p.newIdx), j)
			out = append(out, Finding{
				Severity: Rejected,
				Path:     path,
				New:      describeAgg(a),
				Message: fmt.Sprintf("Aggregate column %s is new in the %s; every group already in the state would start it from nothing, so its value would silently cover only rows read after the restart.",
					a.Name, describeOp(p.new)),
				Remedy: c.revertOrFresh(fmt.Sprintf("Remove %s", path)),
			})
		}
	}
	return out
}

func checkAggregateRemoved(c *change) []Finding {
	var out []Finding
	for _, p := range c.ops().pairs {
		if p.new.Kind != v1.StepAggregate || len(p.old.Aggregates) == len(p.new.Aggregates) {
			continue
		}
		removed, _ := aggregateDiff(p)
		for _, i := range removed {
			a := p.old.Aggregates[i]
			out = append(out, Finding{
				Severity: Rejected,
				Path:     c.opPath(p.newIdx) + ".aggregates",
				Old:      describeAgg(a),
				Message: fmt.Sprintf("Aggregate column %s is removed from the %s; the state of every group holds the step's values in order, so it no longer matches the step.",
					a.Name, describeOp(p.new)),
				Remedy: c.revertOrFresh(fmt.Sprintf("Put %s back into %s.aggregates", describeAgg(a), c.opPath(p.newIdx))),
			})
		}
	}
	return out
}

func checkStateInputExpression(c *change) []Finding {
	var out []Finding
	c.keyPairs(func(p opPair, o, n KeyShape, path string) {
		if o.From == n.From || o.Type != n.Type || o.Column != n.Column || o.Window != nil && o.Window.Column != n.Window.Column ||
			o.Session != nil && o.Session.Column != n.Session.Column {
			return
		}
		col := n.Column
		switch {
		case n.Window != nil:
			col = n.Window.Column
		case n.Session != nil:
			col = n.Session.Column
		}
		at := c.exprPath(col, c.opStep(p.newIdx))
		if at == "" {
			at = path
		}
		out = append(out, Finding{
			Severity: Warning,
			Path:     at,
			Old:      o.From,
			New:      n.From,
			Message: fmt.Sprintf("Key %s of the %s is now computed as %s instead of %s; the keys already in the state were computed the old way, so where the two differ a group appears twice, once per form.",
				col, describeOp(p.new), n.From, o.From),
			Remedy: c.revertOrFresh(fmt.Sprintf("If the two can differ for the same row, revert %s to %s", at, o.From)),
		})
	})
	c.aggPairs(func(p opPair, o, n AggregateShape, path string) {
		if o.From == n.From || o.Column != n.Column || o.Type != n.Type || o.Function != n.Function {
			return
		}
		at := c.exprPath(n.Column, c.opStep(p.newIdx))
		if at == "" {
			at = path + ".column"
		}
		out = append(out, Finding{
			Severity: Warning,
			Path:     at,
			Old:      o.From,
			New:      n.From,
			Message: fmt.Sprintf("The input %s of aggregate column %s in the %s is now computed as %s instead of %s; the values already in the state were computed the old way, so each group mixes both.",
				n.Column, n.Name, describeOp(p.new), n.From, o.From),
			Remedy: c.revertOrFresh(fmt.Sprintf("If the two can differ for the same row, revert %s to %s", at, o.From)),
		})
	})
	return out
}

// watermarkSeverity is sev when state carries over, else Allowed: without state the
// watermark decides nothing.
func (c *change) watermarkSeverity(sev Severity) Severity {
	if c.stateful() {
		return sev
	}
	return Allowed
}

func checkWatermarkColumn(c *change) []Finding {
	o, n := c.old.Watermark, c.new.Watermark
	if o == nil || n == nil || o.Column == n.Column {
		return nil
	}
	f := Finding{
		Severity: c.watermarkSeverity(Rejected),
		Path:     c.watermarkPath() + ".column",
		Old:      o.Column,
		New:      n.Column,
		Message: fmt.Sprintf("The watermark now tracks event time on %s instead of %s; the checkpoint's watermark was computed from %s, never moves back, and decides which state is evicted, so rows would be judged late, and state evicted, by another clock.",
			n.Column, o.Column, o.Column),
		Remedy: c.revertOrFresh(fmt.Sprintf("Revert %s.column to %s", c.watermarkPath(), o.Column)),
	}
	if f.Severity == Allowed {
		f.Message = fmt.Sprintf("The watermark now tracks event time on %s instead of %s; the query keeps no state, so the watermark decides nothing yet.", n.Column, o.Column)
		f.Remedy = ""
	}
	return []Finding{f}
}

func checkWatermarkRemoved(c *change) []Finding {
	o := c.old.Watermark
	if o == nil || c.new.Watermark != nil {
		return nil
	}
	f := Finding{
		Severity: c.watermarkSeverity(Rejected),
		Path:     "spec.transform",
		Old:      fmt.Sprintf("%s, delay %s", o.Column, o.Delay),
		Message: fmt.Sprintf("The watermark on %s is removed; the stateful steps evicted their state by it, so without it they would keep every key from now on next to keys already evicted, and late rows would re-create groups that were already written.",
			o.Column),
		Remedy: c.revertOrFresh(fmt.Sprintf("Put back the watermark on %s with delay %s", o.Column, o.Delay)),
	}
	if f.Severity == Allowed {
		f.Message = fmt.Sprintf("The watermark on %s is removed; the query keeps no state, so it decided nothing.", o.Column)
		f.Remedy = ""
	}
	return []Finding{f}
}

// evictionChanges returns the paired stateful steps, with the same keys, whose eviction by
// the watermark changes while the watermark itself is kept (a removed or moved watermark is
// judged by its own rules).
func (c *change) evictionChanges() []opPair {
	if o, n := c.old.Watermark, c.new.Watermark; o != nil && (n == nil || o.Column != n.Column) {
		return nil
	}
	var out []opPair
	for _, p := range c.ops().pairs {
		if p.old.Eviction != p.new.Eviction && slices.Equal(keyColumns(p.old.Keys), keyColumns(p.new.Keys)) {
			out = append(out, p)
		}
	}
	return out
}

func checkStateEviction(c *change) []Finding {
	var out []Finding
	for _, p := range c.evictionChanges() {
		f := Finding{
			Severity: Rejected,
			Path:     c.opPath(p.newIdx),
			Old:      evictionValue(p.old.Eviction),
			New:      evictionValue(p.new.Eviction),
		}
		if p.new.Eviction != "" {
			f.Message = fmt.Sprintf("The %s would now evict its state by the watermark on %s; its state was built without eviction, and the checkpoint's state metadata pins how a step evicts, so the engine would refuse to open that state.",
				describeOp(p.new), p.new.Eviction)
			f.Remedy = c.revertOrFresh("Keep the watermark off the step's keys (or remove it), so that the step does not evict, as before")
		} else {
			f.Message = fmt.Sprintf("The %s would no longer evict its state by the watermark on %s, because the event-time column no longer reaches its keys; its state was built with eviction, and the checkpoint's state metadata pins how a step evicts, so the engine would refuse to open that state.",
				describeOp(p.new), p.old.Eviction)
			f.Remedy = c.revertOrFresh(fmt.Sprintf("Let the watermark's column reach the step's keys as %s again (a select must copy it unchanged)", p.old.Eviction))
		}
		out = append(out, f)
	}
	return out
}

// keyColumns lists the keys' columns, a window as "window(<column>)", a session as
// "session(<column>)": other rules judge a
// change of them.
func keyColumns(keys []KeyShape) []string {
	cols := make([]string, len(keys))
	for i, k := range keys {
		cols[i] = k.Column
		switch {
		case k.Window != nil:
			cols[i] = "window(" + k.Window.Column + ")"
		case k.Session != nil:
			cols[i] = "session(" + k.Session.Column + ")"
		}
	}
	return cols
}

func evictionValue(col string) string {
	if col == "" {
		return "no eviction"
	}
	return "evicts by " + col
}

func checkWatermarkAdded(c *change) []Finding {
	n := c.new.Watermark
	if n == nil || c.old.Watermark != nil || len(c.evictionChanges()) > 0 {
		return nil
	}
	f := Finding{
		Severity: c.watermarkSeverity(Warning),
		Path:     c.watermarkPath(),
		New:      fmt.Sprintf("%s, delay %s", n.Column, n.Delay),
		Message: fmt.Sprintf("A watermark on %s is new; from the next batch the stateful steps drop rows more than %s late, though none evicts its state by it.",
			n.Column, n.Delay),
		Remedy: "Remove the watermark if late rows must still reach the stateful steps.",
	}
	if f.Severity == Allowed {
		f.Message = fmt.Sprintf("A watermark on %s is new; the query keeps no state, so it decides nothing yet.", n.Column)
		f.Remedy = ""
	}
	return []Finding{f}
}

func checkWatermarkDelay(c *change) []Finding {
	o, n := c.old.Watermark, c.new.Watermark
	if o == nil || n == nil || o.Column != n.Column || sameDuration(o.Delay, n.Delay) {
		return nil
	}
	f := Finding{
		Severity: c.watermarkSeverity(Warning),
		Path:     c.watermarkPath() + ".delay",
		Old:      string(o.Delay),
		New:      string(n.Delay),
		Remedy:   fmt.Sprintf("Revert %s.delay to %s if that is not what you want.", c.watermarkPath(), o.Delay),
	}
	od, _ := o.Delay.Parse()
	nd, _ := n.Delay.Parse()
	switch {
	case f.Severity == Allowed:
		f.Message = fmt.Sprintf("The watermark delay changed from %s to %s; the query keeps no state, so the watermark decides nothing yet.", o.Delay, n.Delay)
		f.Remedy = ""
	case nd > od:
		f.Message = fmt.Sprintf("The watermark delay grew from %s to %s; the checkpoint's watermark never moves back, so rows up to %s late are kept only once event time has advanced by the difference.",
			o.Delay, n.Delay, n.Delay)
	default:
		f.Message = fmt.Sprintf("The watermark delay shrank from %s to %s; at the next batch the watermark jumps forward by the difference, dropping rows that are now late and evicting (in append mode, writing) the state it passes.",
			o.Delay, n.Delay)
	}
	return []Finding{f}
}

// checkUnboundedState judges the new query alone, so it runs with no checkpoint yet too: a
// stateful step whose state the watermark never evicts keeps every key it sees.
func checkUnboundedState(c *change) []Finding {
	var out []Finding
	for i, op := range c.new.Operators {
		why, ok := c.unbounded(op)
		if !ok {
			continue
		}
		what := fmt.Sprintf("every distinct %s it has seen", describeKeys(op.Keys))
		if op.Kind == v1.StepAggregate {
			what = fmt.Sprintf("a group for every distinct %s it has seen", describeKeys(op.Keys))
		}
		out = append(out, Finding{
			Severity: Warning,
			Path:     c.opPath(i),
			Message: fmt.Sprintf("The %s keeps %s, and its state (in memory and in the checkpoint) grows without bound as new keys arrive, because %s.",
				describeOp(op), what, why),
			Remedy: c.boundRemedy(i, op),
		})
	}
	return out
}

// unbounded reports whether the new query's stateful step op keeps its state forever, and
// why: a dropDuplicates, or an aggregate with keys, that the watermark does not evict, or an
// aggregate in complete mode, which keeps every group to write the whole result. (An
// aggregate without keys keeps one group.)
func (c *change) unbounded(op OperatorShape) (string, bool) {
	if op.Kind == v1.StepAggregate && len(op.Keys) == 0 {
		return "", false
	}
	switch {
	case op.Kind == v1.StepAggregate && c.new.OutputMode == v1.OutputComplete:
		return "complete mode writes the whole result every batch and so evicts no group, even with a watermark", true
	case op.Eviction != "":
		return "", false
	case c.new.Watermark == nil:
		return "the query has no watermark to tell it when a key can no longer come again", true
	}
	noun := "columns"
	if op.Kind == v1.StepAggregate {
		noun = "grouping keys (or windows)"
	}
	return fmt.Sprintf("none of its %s is the watermark's event-time column %s, which is what the watermark evicts by", noun, c.new.Watermark.Column), true
}

// boundRemedy says how to bound the state of the new query's stateful step op, at index i
// of c.new.Operators.
func (c *change) boundRemedy(i int, op OperatorShape) string {
	at := c.opPath(i)
	if op.Kind == v1.StepAggregate && c.new.OutputMode == v1.OutputComplete && op.Eviction != "" {
		return fmt.Sprintf("Use spec.outputMode update (or append) instead of complete: the watermark on %s then evicts the groups it closes.", op.Eviction)
	}
	// add names the watermark the step needs, and col the column it tracks.
	add, col := "Add a watermark on an event-time column (a timestamp) before the step", "that column"
	if cols := c.timestampColumns(c.opStep(i)); len(cols) > 0 {
		add = fmt.Sprintf("Add a watermark on an event-time column such as %s before the step", joinOr(cols))
	}
	if w := c.new.Watermark; w != nil {
		add, col = "Keep the watermark on "+w.Column, w.Column
	}
	var r string
	switch ts := eventTimeKey(op); {
	case c.new.Watermark == nil && ts != "":
		r = fmt.Sprintf("Add a watermark on %s before the step, so that it evicts what the watermark passes", ts)
	case op.Kind == v1.StepDropDuplicates:
		r = fmt.Sprintf("%s and include %s in %s.columns, so that keys older than the watermark are evicted (a repeat then counts as a duplicate only with the same event time, as a redelivered record has)", add, col, at)
	default:
		r = fmt.Sprintf("%s and group by a window on %s in %s.groupBy, so that the watermark evicts the windows it closes", add, col, at)
	}
	if op.Kind == v1.StepAggregate && c.new.OutputMode == v1.OutputComplete {
		r += ", and use spec.outputMode update or append instead of complete"
	}
	if c.old.IsZero() {
		return r + "; do it before the first run, while there is no state to keep."
	}
	return r + "; the checkpoint pins how a step evicts (state-eviction), so with this checkpoint make the change and " + c.freshStart() + "."
}

// eventTimeKey returns the column of a stateful step's window, else its first timestamp key
// column: what a watermark would evict the step by; "" when it has none.
func eventTimeKey(op OperatorShape) string {
	for _, k := range op.Keys {
		if k.Window != nil {
			return k.Window.Column
		}
	}
	for _, k := range op.Keys {
		if k.Type == v1.TypeTimestamp {
			return k.Column
		}
	}
	return ""
}

// timestampColumns returns the timestamp columns flowing into step k of the new spec.
func (c *change) timestampColumns(k int) []string {
	cols, err := plan.Columns(c.spec)
	if err != nil || k >= len(cols) {
		return nil
	}
	var out []string
	for _, col := range cols[k] {
		if col.Type == v1.TypeTimestamp {
			out = append(out, col.Name)
		}
	}
	return out
}

// lcs returns, for two lists, which elements belong to a longest common subsequence of their
// signatures.
func lcs[T any](a, b []T, sig func(T) string) (inA, inB []bool) {
	n, m := len(a), len(b)
	t := make([][]int, n+1)
	for i := range t {
		t[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if sig(a[i]) == sig(b[j]) {
				t[i][j] = t[i+1][j+1] + 1
			} else {
				t[i][j] = max(t[i+1][j], t[i][j+1])
			}
		}
	}
	inA, inB = make([]bool, n), make([]bool, m)
	for i, j := 0, 0; i < n && j < m; {
		switch {
		case sig(a[i]) == sig(b[j]):
			inA[i], inB[j] = true, true
			i, j = i+1, j+1
		case t[i+1][j] >= t[i][j+1]:
			i++
		default:
			j++
		}
	}
	return inA, inB
}
