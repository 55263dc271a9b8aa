package compat

// fieldRule is a rule that is data: it compares one field of a part found in both shapes (a
// source, the sink, a stateful step's key or aggregate, a join, the settings) and reports one
// finding for each pair whose field changed. Rules with more logic than "this field changed"
// are functions; Check runs both the same way, through Rule.check.
type fieldRule[T any] struct {
	// pairs calls fn for every part found in both shapes, with the path of the new one.
	pairs func(c *change, fn func(o, n T, at string))
	// when limits the rule to the pairs it judges (e.g. both sinks write files); nil judges
	// every pair.
	when func(o, n T) bool
	// same reports whether the field is unchanged; nil compares the values shown.
	same func(o, n T) bool
	// field is the field's path after the part's; fieldOf, when set, decides it instead.
	field   string
	fieldOf func(o, n T) string
	// value is the field's value as a finding shows it (Finding.Old and New).
	value    func(T) string
	severity Severity
	// severityOf, when set, decides the severity instead.
	severityOf func(o, n T) Severity
	// message says what changed and what it does to the checkpoint.
	message func(c *change, d diff[T]) string
	// remedy says how to go on; nil leaves Finding.Remedy empty.
	remedy func(c *change, d diff[T]) string
}

// diff is one pair a fieldRule found changed: the old and the new part, the paths of the new
// part and of its changed field in the new spec, and the field's values as shown.
type diff[T any] struct {
	o, n     T
	at, path string
	old, new string
}

// check is the rule's Rule.check.
func (r fieldRule[T]) check(c *change) []Finding {
	var out []Finding
	r.pairs(c, func(o, n T, at string) {
		if r.when != nil && !r.when(o, n) {
			return
		}
		d := diff[T]{o: o, n: n, at: at, old: r.value(o), new: r.value(n)}
		if r.same != nil && r.same(o, n) || r.same == nil && d.old == d.new {
			return
		}
		d.path = at + r.field
		if r.fieldOf != nil {
			d.path = at + r.fieldOf(o, n)
		}
		f := Finding{Severity: r.severity, Path: d.path, Old: d.old, New: d.new, Message: r.message(c, d)}
		if r.severityOf != nil {
			f.Severity = r.severityOf(o, n)
		}
		if r.remedy != nil {
			f.Remedy = r.remedy(c, d)
		}
		out = append(out, f)
	})
	return out
}

// revertField is the remedy of a rejected field change: revert the field to its old value,
// or start fresh.
func revertField[T any](c *change, d diff[T]) string {
	return c.revertOrFresh("Revert " + d.path + " to " + d.old)
}

// sinks pairs the old sink with the new one.
func sinks(c *change, fn func(o, n SinkShape, at string)) { fn(c.old.Sink, c.new.Sink, "spec.sink") }

// shapes pairs the old shape with the new one, for the settings of the query as a whole.
func shapes(c *change, fn func(o, n Shape, at string)) { fn(c.old, c.new, "spec") }
