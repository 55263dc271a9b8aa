package compat

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// The checks of the output mode, the output columns, the sink and the settings.

func checkOutputMode(c *change) []Finding {
	o, n := c.old.OutputMode, c.new.OutputMode
	if o == n {
		return nil
	}
	f := Finding{Path: "spec.outputMode", Old: string(o), New: string(n), Severity: Warning,
		Remedy: fmt.Sprintf("Revert spec.outputMode to %s if readers of the sink expect what it wrote.", o)}
	switch {
	case !c.old.hasAggregate() || !c.new.hasAggregate():
		f.Severity, f.Remedy = Allowed, ""
		f.Message = fmt.Sprintf("The output mode changed from %s to %s; without an aggregate both write every row once, so the output stays the same.", o, n)
	case n == v1.OutputComplete && c.old.Watermark != nil:
		f.Severity = Rejected
		f.Message = fmt.Sprintf("The output mode changed from %s to complete; complete writes the whole result every batch, but the groups the watermark has already evicted are gone from the state, so the result would silently miss them.", o)
		f.Remedy = c.revertOrFresh("Revert spec.outputMode to " + string(o))
	case n == v1.OutputComplete:
		f.Message = fmt.Sprintf("The output mode changed from %s to complete; from the next batch the sink receives the whole result every batch, which is whole because without a watermark no state was evicted.", o)
	case o == v1.OutputComplete:
		what := "only the groups that changed"
		if n == v1.OutputAppend {
			what = "each group once, when the watermark closes it"
		}
		f.Message = fmt.Sprintf("The output mode changed from complete to %s; from the next batch the sink receives %s instead of the whole result, and state the watermark passes is evicted.", n, what)
	case n == v1.OutputUpdate:
		f.Message = fmt.Sprintf("The output mode changed from %s to update; from the next batch a group is written every time it changes instead of once when the watermark closes it, so readers see several rows per group.", o)
	default:
		f.Message = fmt.Sprintf("The output mode changed from %s to append; from the next batch a group is written once, when the watermark closes it, so groups already written as updates are written once more.", o)
	}
	return []Finding{f}
}

func checkOutputColumns(c *change) []Finding {
	o, n := c.old.Output, c.new.Output
	if c.old.Sink.Kind != c.new.Sink.Kind || describeColumns(o) == describeColumns(n) {
		return nil
	}
	// Renamed aggregate outputs are reported by aggregate-renamed.
	renamed := slices.Clone(o)
	c.aggPairs(func(_ opPair, oa, na AggregateShape, _ string) {
		for i := range renamed {
			if renamed[i].Name == oa.Name && oa.Function == na.Function && oa.Column == na.Column {
				renamed[i].Name = na.Name
			}
		}
	})
	if describeColumns(renamed) == describeColumns(n) {
		return nil
	}
	s := c.new.Sink
	f := Finding{Severity: Warning, Path: c.outputPath(), Old: describeColumns(o), New: describeColumns(n),
		Remedy: "Keep the old columns if the sink's readers cannot take the new ones."}
	var effect string
	switch s.Kind {
	case v1.SinkDelta:
		effect = "the Delta table's schema must accept them, or its writes fail"
	case v1.SinkFiles:
		effect = "the folder then holds files of both schemas, which its readers must accept"
	case v1.SinkKafka:
		effect = "consumers of topic " + s.Topic + " receive records of the new form"
	case v1.SinkWebhook:
		effect = "the receiver gets rows of the new form"
	default:
		f.Severity, f.Remedy = Allowed, ""
		effect = "only the printout changes"
	}
	f.Message = fmt.Sprintf("The sink now receives the columns %s instead of %s, from the next batch; %s.", describeColumns(n), describeColumns(o), effect)
	return []Finding{f}
}

// SinkSwitch says how changing the sink's kind from one kind to another is judged when the
// new query runs in the given output mode. A change to console is allowed (it keeps nothing).
// A change to kafka or webhook is a warning: they see only new data, as Spark allows for file
// to Kafka. A change to files or delta is rejected: a folder or table is read as the query's
// whole output, and the new one would hold only rows from the next batch on (Spark forbids
// Kafka to file for the same reason), as is a change to postgres — except to delta or
// postgres in complete mode, which rewrite the whole result each batch (a warning).
func SinkSwitch(from, to v1.SinkKind, mode v1.OutputMode) Severity {
	switch {
	case from == to || to == v1.SinkConsole:
		return Allowed
	case to == v1.SinkKafka || to == v1.SinkWebhook:
		return Warning
	case (to == v1.SinkDelta || to == v1.SinkPostgres) && mode == v1.OutputComplete:
		return Warning
	}
	return Rejected
}

func checkSinkKind(c *change) []Finding {
	o, n := c.old.Sink, c.new.Sink
	if o.Kind == n.Kind {
		return nil
	}
	f := Finding{
		Severity: SinkSwitch(o.Kind, n.Kind, c.new.OutputMode),
		Path:     "spec.sink." + string(n.Kind),
		Old:      describeSink(o),
		New:      describeSink(n),
		Remedy:   fmt.Sprintf("Revert the sink to %s if its readers must keep receiving rows.", describeSink(o)),
	}
	switch {
	case f.Severity == Rejected:
		f.Message = fmt.Sprintf("The sink changed from %s to %s; a folder or table is read as the query's whole output, but the new one would receive only rows from the next batch on, with nothing to mark the missing history.", o.Kind, n.Kind)
		f.Remedy = c.revertOrFresh("Revert the sink to " + describeSink(o))
	case n.Kind == v1.SinkConsole:
		f.Message = fmt.Sprintf("The sink changed from %s to console; rows from the next batch on are printed and kept nowhere, and %s stops receiving them.", o.Kind, describeSink(o))
	case n.Kind == v1.SinkDelta || n.Kind == v1.SinkPostgres:
		f.Message = fmt.Sprintf("The sink changed from %s to %s; in complete mode the table receives the whole result at the next batch, and %s stops receiving rows.", o.Kind, n.Kind, describeSink(o))
	default:
		f.Message = fmt.Sprintf("The sink changed from %s to %s; %s sees only new data, from the next batch on, and %s stops receiving rows.", o.Kind, n.Kind, describeSink(n), describeSink(o))
	}
	return []Finding{f}
}

var filesSinkPath = fieldRule[SinkShape]{
	pairs: sinks, when: bothSinks(v1.SinkFiles), field: ".files.path",
	value: func(s SinkShape) string { return s.Path }, severity: Rejected,
	message: func(_ *change, d diff[SinkShape]) string {
		return fmt.Sprintf("The files sink now writes to %s instead of %s; the new folder would receive only rows from the next batch on while the old one keeps the rows before, so neither holds the query's whole output.",
			d.new, d.old)
	},
	remedy: revertField[SinkShape],
}

var filesSinkFormat = fieldRule[SinkShape]{
	pairs: sinks, field: ".files.format",
	when:  func(o, n SinkShape) bool { return bothSinks(v1.SinkFiles)(o, n) && o.Path == n.Path },
	value: func(s SinkShape) string { return string(s.Format) }, severity: Rejected,
	message: func(_ *change, d diff[SinkShape]) string {
		return fmt.Sprintf("The files sink now writes %s instead of %s into %s; the folder would then hold files of both formats, which its readers cannot read as one dataset.",
			d.new, d.old, d.n.Path)
	},
	remedy: revertField[SinkShape],
}

func checkDeltaSinkPath(c *change) []Finding {
	o, n := c.old.Sink, c.new.Sink
	if o.Kind != v1.SinkDelta || n.Kind != v1.SinkDelta || o.Path == n.Path {
		return nil
	}
	return tableMoved(c, "Delta", "spec.sink.delta.path", o.Path, n.Path, o.Path, "the table at "+n.Path)
}

func checkPostgresSinkTable(c *change) []Finding {
	o, n := c.old.Sink, c.new.Sink
	if o.Kind != v1.SinkPostgres || n.Kind != v1.SinkPostgres || sameTable(o, n) {
		return nil
	}
	path := "spec.sink.postgres.table"
	if o.Table == n.Table {
		path = "spec.sink.postgres.connection"
	}
	fs := tableMoved(c, "PostgreSQL", path, describeSink(o), describeSink(n), describeSink(o), describeSink(n))
	if o.Table == n.Table && o.Connection == n.Connection && fs[0].Severity == Rejected {
		// The spec is unchanged: the Secret or variable now names another server.
		fs[0].Remedy = c.revertOrFresh(fmt.Sprintf("Point %s back at %s", o.Connection, o.Server))
	}
	if o.Table == n.Table && (o.Server == "" || n.Server == "") {
		unread := "the new spec's"
		switch {
		case o.Server == "" && n.Server == "":
			unread = "either spec's"
		case o.Server == "":
			unread = "the checkpoint's"
		}
		fs[0].Message += fmt.Sprintf(" The server and database behind %s connection could not be read, so the sink is judged by where its connection string comes from (%s, was %s): if both name the same server and database, let the server be read (the Secret in the query's namespace; for lockstep plan, the variable in its environment) and plan again.",
			unread, n.Connection, o.Connection)
	}
	return fs
}

// tableMoved is the finding of a sink that now writes another table: rejected, since the new
// table would hold only the rows from the next batch on and the old one the rows before; a
// warning in complete mode, where the new table receives the whole result. path is the field
// that changed, revertTo its old value; oldTable and newTable name the tables in the message.
func tableMoved(c *change, sink, path, revertTo, newValue, oldTable, newTable string) []Finding {
	revertField := path
	if strings.HasPrefix(path, "spec.sink.postgres.") {
		revertField = "spec.sink.postgres"
	}
	f := Finding{
		Severity: Rejected,
		Path:     path,
		Old:      revertTo,
		New:      newValue,
		Message: fmt.Sprintf("The %s sink now writes %s instead of %s; the new table would receive only rows from the next batch on while the old one keeps the rows before, so neither holds the query's whole output.",
			sink, newTable, oldTable),
		Remedy: c.revertOrFresh("Revert " + revertField + " to " + revertTo),
	}
	if c.new.OutputMode == v1.OutputComplete {
		f.Severity = Warning
		f.Message = fmt.Sprintf("The %s sink now writes %s instead of %s; in complete mode the new table receives the whole result at the next batch, and the old one stops changing.", sink, newTable, oldTable)
		f.Remedy = fmt.Sprintf("Revert %s to %s if readers of the old table must keep seeing updates.", revertField, revertTo)
	}
	return []Finding{f}
}

// sameTable reports whether two sink shapes write the same delta or postgres table.
func sameTable(o, n SinkShape) bool {
	switch {
	case o.Kind != n.Kind:
		return false
	case o.Kind == v1.SinkDelta:
		return o.Path == n.Path
	case o.Kind == v1.SinkPostgres && o.Server != "" && n.Server != "":
		return o.Table == n.Table && o.Server == n.Server
	case o.Kind == v1.SinkPostgres:
		// A server not read: where the connection string comes from stands in for it.
		return o.Table == n.Table && o.Connection == n.Connection
	}
	return false
}

func checkSinkKeys(c *change) []Finding {
	o, n := c.old.Sink, c.new.Sink
	if !sameTable(o, n) || o.Keys == nil || n.Keys == nil || slices.Equal(o.Keys, n.Keys) {
		return nil
	}
	field := "mergeKeys"
	if n.Kind == v1.SinkPostgres {
		field = "keyColumns"
	}
	return []Finding{{
		Severity: Rejected,
		Path:     "spec.sink." + string(n.Kind) + "." + field,
		Old:      describeList(o.Keys),
		New:      describeList(n.Keys),
		Message: fmt.Sprintf("The %s sink's update key changed from %s to %s; %s holds one row per old key, and upserting by the new key would leave rows the new key never replaces next to the rows it writes.",
			n.Kind, describeList(o.Keys), describeList(n.Keys), describeSink(n)),
		Remedy: c.revertOrFresh("Revert the key to " + describeList(o.Keys) + ", or write to a new table"),
	}}
}

var deltaSinkPartitioning = fieldRule[SinkShape]{
	pairs: sinks, field: ".delta.partitionColumns",
	when:  func(o, n SinkShape) bool { return bothSinks(v1.SinkDelta)(o, n) && o.Path == n.Path },
	same:  func(o, n SinkShape) bool { return slices.Equal(o.PartitionColumns, n.PartitionColumns) },
	value: func(s SinkShape) string { return describeList(s.PartitionColumns) }, severity: Rejected,
	message: func(_ *change, d diff[SinkShape]) string {
		return fmt.Sprintf("The Delta sink's partition columns changed from %s to %s; the table at %s was created partitioned by %s, and appending to a Delta table cannot change its partitioning.",
			d.old, d.new, d.n.Path, d.old)
	},
	remedy: revertField[SinkShape],
}

var kafkaSinkTopic = fieldRule[SinkShape]{
	pairs: sinks, when: bothSinks(v1.SinkKafka), field: ".kafka.topic",
	value: func(s SinkShape) string { return s.Topic }, severity: Warning,
	message: func(_ *change, d diff[SinkShape]) string {
		return fmt.Sprintf("The Kafka sink now produces to topic %s instead of %s; the new topic sees only records from the next batch on (a batch replayed at restart included), and the old one stops receiving them.",
			d.new, d.old)
	},
	remedy: func(_ *change, d diff[SinkShape]) string {
		return fmt.Sprintf("Revert %s to %s if its consumers must keep receiving records.", d.path, d.old)
	},
}

var kafkaSinkFormat = fieldRule[SinkShape]{
	pairs: sinks, field: ".kafka.format",
	when:  func(o, n SinkShape) bool { return bothSinks(v1.SinkKafka)(o, n) && o.ValueFormat != "" },
	value: func(s SinkShape) string { return string(s.ValueFormat) }, severity: Warning,
	message: func(_ *change, d diff[SinkShape]) string {
		return fmt.Sprintf("The Kafka sink now writes %s instead of %s to topic %s; from the next batch on (a batch replayed at restart included) its consumers read records of both formats in one topic.",
			d.new, d.old, d.n.Topic)
	},
	remedy: func(_ *change, d diff[SinkShape]) string {
		return fmt.Sprintf("Revert %s to %s, or write the new format to a new topic.", d.path, d.old)
	},
}

var kafkaSinkSubject = fieldRule[SinkShape]{
	pairs: sinks, when: kafkaSinksWithSubject, field: ".kafka.schemaRegistry.subject",
	value: func(s SinkShape) string { return s.Subject }, severity: Warning,
	message: func(_ *change, d diff[SinkShape]) string {
		return fmt.Sprintf("The Kafka sink now registers its value schema under subject %s instead of %s, judged against the new subject's history; consumers that follow %s no longer see its changes.",
			d.new, d.old, d.old)
	},
	remedy: func(_ *change, d diff[SinkShape]) string {
		return fmt.Sprintf("Revert %s to %s if consumers follow it.", d.path, d.old)
	},
}

var kafkaSinkSchemaVersion = fieldRule[SinkShape]{
	pairs: sinks, when: kafkaSinksWithSubject, field: ".kafka.schemaRegistry.version",
	value: func(s SinkShape) string {
		if s.SchemaVersion == 0 {
			return "derived from the output columns"
		}
		return fmt.Sprintf("version %d", s.SchemaVersion)
	},
	severity: Warning,
	message: func(_ *change, d diff[SinkShape]) string {
		return fmt.Sprintf("The Kafka sink's value schema changes from %s to %s of subject %s; from the next batch on its consumers read records of both.",
			d.old, d.new, d.n.Subject)
	},
	remedy: func(*change, diff[SinkShape]) string {
		return "Keep the old pin if consumers cannot read the new schema."
	},
}

// kafkaSinksWithSubject reports whether both sinks are Kafka sinks with a Schema Registry
// subject.
func kafkaSinksWithSubject(o, n SinkShape) bool {
	return bothSinks(v1.SinkKafka)(o, n) && o.Subject != "" && n.Subject != ""
}

// bothSinks returns a fieldRule.when that holds when both sinks are of kind k.
func bothSinks(k v1.SinkKind) func(o, n SinkShape) bool {
	return func(o, n SinkShape) bool { return o.Kind == k && n.Kind == k }
}

var webhookURL = fieldRule[SinkShape]{
	pairs: sinks, when: bothSinks(v1.SinkWebhook), field: ".webhook.url",
	value: func(s SinkShape) string { return s.URL }, severity: Warning,
	message: func(_ *change, d diff[SinkShape]) string {
		return fmt.Sprintf("The webhook sink now posts to %s instead of %s, from the next batch on (a batch replayed at restart included), with Idempotency-Keys that continue the same sequence.",
			d.new, d.old)
	},
	remedy: func(_ *change, d diff[SinkShape]) string {
		return fmt.Sprintf("Revert %s to %s if the old receiver must keep receiving batches.", d.path, d.old)
	},
}

func checkSinkGuarantee(c *change) []Finding {
	kinds := func(s Shape) []v1.SourceKind {
		var ks []v1.SourceKind
		for _, src := range s.Sources {
			ks = append(ks, src.Kind)
		}
		return ks
	}
	og, _ := guarantee(kinds(c.old), c.old.Sink)
	ng, _ := guarantee(kinds(c.new), c.new.Sink)
	if og == ng {
		return nil
	}
	path := "spec.sink." + string(c.new.Sink.Kind)
	if c.old.Sink.Kind == v1.SinkKafka && c.new.Sink.Kind == v1.SinkKafka {
		path += ".exactlyOnce"
	}
	f := Finding{Path: path, Old: string(og), New: string(ng)}
	if guaranteeRank(ng) > guaranteeRank(og) {
		f.Severity = Allowed
		f.Message = fmt.Sprintf("The delivery guarantee rises from %s to %s from the next batch on.", og, ng)
		return []Finding{f}
	}
	f.Severity = Warning
	f.Message = fmt.Sprintf("The delivery guarantee drops from %s to %s from the next batch on: a batch replayed after a failure may reach the sink twice.", og, ng)
	if ng == v1.GuaranteeNone {
		f.Message = fmt.Sprintf("The delivery guarantee drops from %s to none from the next batch on: the new sink keeps nothing and prints a replayed batch again.", og)
	}
	f.Remedy = fmt.Sprintf("Keep %s if readers rely on %s delivery.", describeSink(c.old.Sink), og)
	return []Finding{f}
}

var statePartitions = fieldRule[Shape]{
	pairs: shapes, field: ".stateStore.partitions",
	value: func(s Shape) string { return fmt.Sprint(s.Pinned.StatePartitions) }, severity: Rejected,
	message: func(_ *change, d diff[Shape]) string {
		why := "state keys are hashed into that many partitions, so another count would look for every key in the wrong partition"
		if !d.o.Stateful() {
			why = "it keeps that value for every later batch, so the new one would be silently ignored"
		}
		return fmt.Sprintf("State partitions changed from %s to %s; the checkpoint pinned %s at its first batch, and %s.", d.old, d.new, d.old, why)
	},
	remedy: revertField[Shape],
}

var runtimeChange = fieldRule[Shape]{
	pairs: shapes, field: ".runtime",
	same:  func(o, n Shape) bool { return o.Pinned.Runtime == n.Pinned.Runtime },
	value: func(s Shape) string { return string(cmp.Or(s.Pinned.Runtime, v1.RuntimeLockstep)) }, severity: Rejected,
	message: func(_ *change, d diff[Shape]) string {
		return fmt.Sprintf("The runtime changed from %s to %s; the checkpoint was written by %s, whose checkpoint format %s cannot read (offsets, commits and state differ).", d.old, d.new, d.old, d.new)
	},
	remedy: func(c *change, d diff[Shape]) string {
		return c.revertOrFresh(fmt.Sprintf("Run it on %s again (spec.runtime, or lockstep run --runtime %s)", d.old, d.old))
	},
}

var triggerChange = fieldRule[Shape]{
	pairs: shapes, field: ".trigger",
	same: func(o, n Shape) bool {
		return describeTrigger(o.Trigger) == describeTrigger(n.Trigger) || o.Trigger.ProcessingTime != "" && sameDuration(o.Trigger.ProcessingTime, n.Trigger.ProcessingTime)
	},
	value: func(s Shape) string { return describeTrigger(s.Trigger) }, severity: Allowed,
	message: func(_ *change, d diff[Shape]) string {
		return fmt.Sprintf("The trigger changed from %s to %s; it applies from the next newly planned batch, and a batch planned before the restart is first re-run with its logged offsets.",
			d.old, d.new)
	},
}

var kafkaSinkKeyFormat = fieldRule[SinkShape]{
	pairs: sinks, field: ".kafka.keyFormat",
	when:  func(o, n SinkShape) bool { return bothSinks(v1.SinkKafka)(o, n) && o.ValueFormat != "" },
	same:  func(o, n SinkShape) bool { return o.KeyFormat == n.KeyFormat },
	value: func(s SinkShape) string { return string(cmp.Or(s.KeyFormat, v1.KafkaKeyString)) }, severity: Warning,
	message: func(_ *change, d diff[SinkShape]) string {
		return fmt.Sprintf("The Kafka sink now writes its keys as %s instead of %s to topic %s; from the next batch on (a batch replayed at restart included) consumers read keys of both formats, and a key's records may move to another partition.",
			d.new, d.old, d.n.Topic)
	},
	remedy: func(_ *change, d diff[SinkShape]) string {
		return fmt.Sprintf("Revert %s to %s, or write the new key format to a new topic.", d.path, d.old)
	},
}
