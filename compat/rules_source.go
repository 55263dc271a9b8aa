package compat

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// The checks of the query as a whole and of its sources.

func checkInvalidSpec(c *change) []Finding {
	if c.err == nil {
		return nil
	}
	c.stop = true
	return []Finding{{
		Severity: Rejected,
		Path:     "spec",
		Message:  fmt.Sprintf("The new spec cannot be judged against the checkpoint until it validates: %v.", errors.Unwrap(c.err)),
		Remedy:   "Fix the problems listed, then plan again.",
	}}
}

func checkShapeVersion(c *change) []Finding {
	if c.old.Version <= ShapeVersion {
		return nil
	}
	c.stop = true
	return []Finding{{
		Severity: Rejected,
		Path:     "spec",
		Old:      fmt.Sprintf("shape version %d", c.old.Version),
		New:      fmt.Sprintf("shape version %d", ShapeVersion),
		Message:  fmt.Sprintf("The checkpoint's shape was recorded by a newer Lockstep (version %d; this one reads %d), so this Lockstep cannot tell what the checkpoint depends on.", c.old.Version, ShapeVersion),
		Remedy:   "Plan and run the query with the newer Lockstep, or " + c.freshStart() + ".",
	}}
}

func checkSourceAdded(c *change) []Finding {
	var out []Finding
	for _, s := range c.new.Sources {
		if _, ok := c.old.source(s.Name); ok || c.renamedTo(s.Name) {
			continue
		}
		p := c.sourcePath(s.Name)
		state := ""
		if c.stateful() {
			state = ", adding to the existing state"
		}
		f := Finding{
			Severity: Warning,
			Path:     p,
			New:      describeSource(s),
			Message:  fmt.Sprintf("Source %q is new to the checkpoint, so it starts %s and its rows join the query from the next batch%s.", s.Name, startDesc(s), state),
		}
		if c.old.Pinned.Runtime == v1.RuntimeSpark {
			// Spark 4.2 refuses a restart with more sources than its offsets log records, source
			// evolution on or not (docs/compatibility-spark.md).
			f.Severity = Rejected
			f.Message = fmt.Sprintf("Source %q is new; Spark refuses to restart a checkpoint with more sources than its offsets log records (\"There are N sources in the checkpoint offsets and now there are M\").", s.Name)
			f.Remedy = c.revertOrFresh("Remove the source")
			out = append(out, f)
			continue
		}
		switch s.Kind {
		case v1.SourceKafka:
			f.Remedy = fmt.Sprintf("Set %s.kafka.startingOffsets before this run to start it elsewhere: it is read only when the checkpoint first sees a source name.", p)
		case v1.SourceDelta:
			f.Remedy = fmt.Sprintf("Set %s.delta.startingVersion before this run to start it elsewhere: it is read only when the checkpoint first sees a source name.", p)
		case v1.SourceFiles:
			f.Remedy = fmt.Sprintf("Move the files already in %s away before this run if they should not be read.", s.Path)
		}
		out = append(out, f)
	}
	return out
}

func checkSourceRemoved(c *change) []Finding {
	var out []Finding
	for _, s := range c.old.Sources {
		if _, ok := c.new.source(s.Name); ok || c.renamedFrom(s.Name) {
			continue
		}
		f := Finding{
			Severity: Warning,
			Path:     "spec.sources",
			Old:      s.Name + ": " + describeSource(s),
			Message:  fmt.Sprintf("Source %q is no longer read: what it has not read yet is never read, and if the name comes back later it starts afresh %s.", s.Name, startDesc(s)),
			Remedy:   fmt.Sprintf("Keep source %q in spec.sources to go on reading it from its checkpointed offsets.", s.Name),
		}
		if c.old.Pinned.Runtime == v1.RuntimeSpark {
			// Spark 4.2 refuses a restart with fewer sources than its offsets log records too
			// (docs/compatibility-spark.md).
			f.Severity = Rejected
			f.Message = fmt.Sprintf("Source %q is removed; Spark refuses to restart a checkpoint with another number of sources than its offsets log records.", s.Name)
			f.Remedy = c.revertOrFresh(fmt.Sprintf("Keep source %q", s.Name))
		}
		out = append(out, f)
	}
	return out
}

func checkSourceRenamed(c *change) []Finding {
	var out []Finding
	for _, r := range c.sourceRenames() {
		f := Finding{
			Severity: Warning,
			Path:     c.sourcePath(r.new.Name) + ".name",
			Old:      r.old.Name,
			New:      r.new.Name,
			Message: fmt.Sprintf("Source %q reads the same %s as the checkpoint's source %q, but a new name starts afresh %s instead of continuing from the offsets of %q, so the sink receives again what was read before, or misses what was not.",
				r.new.Name, describeSource(r.new), r.old.Name, startDesc(r.new), r.old.Name),
			Remedy: fmt.Sprintf("Rename it back to %q to continue from its offsets.", r.old.Name),
		}
		if c.stateful() {
			f.Severity = Rejected
			f.Message = fmt.Sprintf("Source %q reads the same %s as the checkpoint's source %q, but a new name starts afresh %s instead of continuing from the offsets of %q, so rows already in the state would be added to it twice, or rows not read yet would be skipped.",
				r.new.Name, describeSource(r.new), r.old.Name, startDesc(r.new), r.old.Name)
			f.Remedy = c.revertOrFresh(fmt.Sprintf("Rename it back to %q", r.old.Name))
		}
		out = append(out, f)
	}
	return out
}

// sourcePairs calls fn for every source in both shapes under the same name and kind, with
// the new source's path.
func (c *change) sourcePairs(fn func(o, n SourceShape, path string)) {
	for _, n := range c.new.Sources {
		if o, ok := c.old.source(n.Name); ok && o.Kind == n.Kind {
			fn(o, n, c.sourcePath(n.Name))
		}
	}
}

var sourceKind = fieldRule[SourceShape]{
	pairs:   (*change).sourcesByName,
	same:    func(o, n SourceShape) bool { return o.Kind == n.Kind },
	fieldOf: func(_, n SourceShape) string { return "." + string(n.Kind) },
	value:   describeSource, severity: Rejected,
	message: func(_ *change, d diff[SourceShape]) string {
		return fmt.Sprintf("Source %q changed from %s to %s; the checkpoint holds %s offsets under that name, which mean nothing to a %s source.",
			d.n.Name, d.o.Kind, d.n.Kind, d.o.Kind, d.n.Kind)
	},
	remedy: func(c *change, d diff[SourceShape]) string {
		return c.revertOrFresh(fmt.Sprintf("Revert source %q to %s, read the %s data under a new source name (it then starts %s)", d.n.Name, d.old, d.n.Kind, startDesc(d.n)))
	},
}

// sourcesByName calls fn for every source in both shapes under the same name, of any kind,
// with the new source's path.
func (c *change) sourcesByName(fn func(o, n SourceShape, at string)) {
	for _, n := range c.new.Sources {
		if o, ok := c.old.source(n.Name); ok {
			fn(o, n, c.sourcePath(n.Name))
		}
	}
}

var kafkaTopics = fieldRule[SourceShape]{
	pairs: (*change).sourcePairs, when: sourceOf(v1.SourceKafka),
	same: func(o, n SourceShape) bool {
		return slices.Equal(o.Topics, n.Topics) && o.TopicPattern == n.TopicPattern
	},
	fieldOf: func(_, n SourceShape) string {
		if n.TopicPattern != "" {
			return ".kafka.topicPattern"
		}
		return ".kafka.topics"
	},
	value: describeTopics, severity: Rejected,
	message: func(_ *change, d diff[SourceShape]) string {
		return fmt.Sprintf("Source %q now reads %s instead of %s; its checkpointed offsets cover only the partitions it read, so partitions of new topics would be read from earliest whatever startingOffsets says, and partitions no longer read would be reported as lost data.",
			d.n.Name, d.new, d.old)
	},
	remedy: func(c *change, d diff[SourceShape]) string {
		return c.revertOrFresh(fmt.Sprintf("Revert %s.kafka to %s, read the new topics as a new source with its own name (it then starts at its startingOffsets)", d.at, d.old))
	},
}

var filesPath = fieldRule[SourceShape]{
	pairs: (*change).sourcePairs, when: sourceOf(v1.SourceFiles), field: ".files.path",
	value: func(s SourceShape) string { return s.Path }, severity: Rejected,
	message: func(_ *change, d diff[SourceShape]) string {
		return fmt.Sprintf("Source %q now reads the folder %s instead of %s; the checkpoint's log of files already read belongs to %s, so the query would treat every file in %s as new, or miss files it believes it has read.",
			d.n.Name, d.new, d.old, d.old, d.new)
	},
	remedy: func(c *change, d diff[SourceShape]) string {
		return c.revertOrFresh(fmt.Sprintf("Revert %s to %s, read the new folder as a new source with its own name (it then reads every file already there)", d.path, d.old))
	},
}

var filesFormat = fieldRule[SourceShape]{
	pairs: (*change).sourcePairs, when: sourceOf(v1.SourceFiles), field: ".files.format",
	value: func(s SourceShape) string { return s.Format }, severity: Rejected,
	message: func(_ *change, d diff[SourceShape]) string {
		return fmt.Sprintf("Source %q now parses its folder as %s instead of %s; the checkpoint records the %s files it read there, so either the remaining files no longer parse or the folder now holds another dataset that the checkpoint knows nothing of.",
			d.n.Name, d.new, d.old, d.old)
	},
	remedy: func(c *change, d diff[SourceShape]) string {
		return c.revertOrFresh(fmt.Sprintf("Revert %s to %s, read the %s files as a new source with its own name", d.path, d.old, d.new))
	},
}

var deltaPath = fieldRule[SourceShape]{
	pairs: (*change).sourcePairs, when: sourceOf(v1.SourceDelta), field: ".delta.path",
	value: func(s SourceShape) string { return s.Path }, severity: Rejected,
	message: func(_ *change, d diff[SourceShape]) string {
		return fmt.Sprintf("Source %q now reads the Delta table at %s instead of %s; its checkpointed offsets are versions of the old table's log and mean nothing for another table.",
			d.n.Name, d.new, d.old)
	},
	remedy: func(c *change, d diff[SourceShape]) string {
		return c.revertOrFresh(fmt.Sprintf("Revert %s to %s, read the new table as a new source with its own name", d.path, d.old))
	},
}

var kafkaFormat = fieldRule[SourceShape]{
	pairs: (*change).sourcePairs, when: sourceOf(v1.SourceKafka), field: ".kafka.format",
	value: func(s SourceShape) string { return s.Format }, severity: Warning,
	message: func(_ *change, d diff[SourceShape]) string {
		return fmt.Sprintf("Source %q now decodes record values as %s instead of %s, from the next batch on, including a batch replayed at restart, while its offsets stay valid.",
			d.n.Name, d.new, d.old)
	},
	remedy: func(_ *change, d diff[SourceShape]) string {
		return fmt.Sprintf("Revert %s to %s unless the topic's records changed format.", d.path, d.old)
	},
}

var kafkaSubject = fieldRule[SourceShape]{
	pairs: (*change).sourcePairs, field: ".kafka.schemaRegistry.subject",
	when: func(o, n SourceShape) bool {
		return o.Kind == v1.SourceKafka && o.Subject != "" && n.Subject != ""
	},
	value: func(s SourceShape) string { return s.Subject }, severity: Allowed,
	message: func(_ *change, d diff[SourceShape]) string {
		return fmt.Sprintf("Source %q now checks its columns at start against the latest schema of subject %s instead of %s; records are still decoded by the schema id each carries.",
			d.n.Name, d.new, d.old)
	},
}

// sourceOf returns a fieldRule.when that holds for a pair of sources of kind k (the sources
// of a pair have the same kind).
func sourceOf(k v1.SourceKind) func(o, n SourceShape) bool {
	return func(o, _ SourceShape) bool { return o.Kind == k }
}

func checkRateLimit(c *change) []Finding {
	var out []Finding
	const applies = "; the limit applies from the next newly planned batch, and a batch replayed at restart keeps its logged range."
	c.sourcePairs(func(o, n SourceShape, p string) {
		switch {
		case describeLimit(o.MaxOffsetsPerTrigger) != describeLimit(n.MaxOffsetsPerTrigger):
			out = append(out, Finding{
				Severity: Allowed,
				Path:     p + ".kafka.maxOffsetsPerTrigger",
				Old:      describeLimit(o.MaxOffsetsPerTrigger),
				New:      describeLimit(n.MaxOffsetsPerTrigger),
				Message: fmt.Sprintf("Source %q now reads %s records per batch instead of %s%s",
					n.Name, perBatch(n.MaxOffsetsPerTrigger), perBatch(o.MaxOffsetsPerTrigger), applies),
			})
		case describeLimit(o.MaxFilesPerTrigger) != describeLimit(n.MaxFilesPerTrigger):
			out = append(out, Finding{
				Severity: Allowed,
				Path:     fmt.Sprintf("%s.%s.maxFilesPerTrigger", p, n.Kind),
				Old:      describeLimit(o.MaxFilesPerTrigger),
				New:      describeLimit(n.MaxFilesPerTrigger),
				Message: fmt.Sprintf("Source %q now reads %s files per batch instead of %s%s",
					n.Name, perBatch(n.MaxFilesPerTrigger), perBatch(o.MaxFilesPerTrigger), applies),
			})
		case o.RowsPerSecond != n.RowsPerSecond:
			out = append(out, Finding{
				Severity: Allowed,
				Path:     p + ".rate.rowsPerSecond",
				Old:      fmt.Sprint(o.RowsPerSecond),
				New:      fmt.Sprint(n.RowsPerSecond),
				Message: fmt.Sprintf("Source %q now generates %d rows a second instead of %d, from the next newly planned batch; a batch replayed at restart keeps its logged range.",
					n.Name, n.RowsPerSecond, o.RowsPerSecond),
			})
		}
	})
	return out
}

func perBatch[T int32 | int64](p *T) string {
	if p == nil {
		return "all available"
	}
	return "at most " + describeLimit(p)
}

func checkStartingPosition(c *change) []Finding {
	var out []Finding
	c.sourcePairs(func(o, n SourceShape, p string) {
		var field, from, to string
		switch {
		case o.Kind == v1.SourceKafka && o.StartingOffsets != n.StartingOffsets:
			field, from, to = "startingOffsets", o.StartingOffsets, n.StartingOffsets
		case o.Kind == v1.SourceDelta && describeVersion(o.StartingVersion) != describeVersion(n.StartingVersion):
			field, from, to = "startingVersion", describeVersion(o.StartingVersion), describeVersion(n.StartingVersion)
		default:
			return
		}
		out = append(out, Finding{
			Severity: Warning,
			Path:     fmt.Sprintf("%s.%s.%s", p, n.Kind, field),
			Old:      from,
			New:      to,
			Message: fmt.Sprintf("Source %q changed its %s from %s to %s, which has no effect: the source is already in the checkpoint and continues from its offsets there, and %s is read only for a source new to the checkpoint.",
				n.Name, field, from, to, field),
			Remedy: "Read it under a new source name to start at the new position (a new name starts at its " + field + "), or " + c.freshStart() + ".",
		})
	})
	return out
}

func checkSourceColumns(c *change) []Finding {
	var out []Finding
	c.sourcePairs(func(o, n SourceShape, p string) {
		for j, col := range n.Columns {
			if _, ok := o.Columns.Lookup(col.Name); !ok {
				out = append(out, Finding{
					Severity: Allowed,
					Path:     fmt.Sprintf("%s.schema.columns[%d]", p, j),
					New:      col.Name + " " + string(col.Type),
					Message:  fmt.Sprintf("Source %q now reads column %s (%s), in the records it reads from the next batch on.", n.Name, col.Name, col.Type),
				})
			}
		}
		for _, col := range o.Columns {
			if _, ok := n.Columns.Lookup(col.Name); !ok {
				out = append(out, Finding{
					Severity: Allowed,
					Path:     p + ".schema.columns",
					Old:      col.Name + " " + string(col.Type),
					Message:  fmt.Sprintf("Source %q no longer reads column %s, from the next batch on.", n.Name, col.Name),
				})
			}
		}
	})
	return out
}

var sourceColumnType = fieldRule[sourceColumn]{
	pairs: (*change).sourceColumns, field: ".type",
	value: func(sc sourceColumn) string { return string(sc.col.Type) }, severity: Warning,
	message: func(_ *change, d diff[sourceColumn]) string {
		return fmt.Sprintf("Column %s of source %q is now read as %s instead of %s, from the next batch on, including a batch replayed at restart; stateful steps that use it are judged by their own rules.",
			d.n.col.Name, d.n.src.Name, d.new, d.old)
	},
	remedy: func(_ *change, d diff[sourceColumn]) string {
		return fmt.Sprintf("Revert %s to %s unless the records themselves changed type.", d.path, d.old)
	},
}

// sourceColumn is a column of a source's schema, with the source.
type sourceColumn struct {
	src SourceShape
	col v1.Column
}

// sourceColumns calls fn for every column of a source in both shapes (under the same name
// and kind) that both schemas hold, with the path of the new column.
func (c *change) sourceColumns(fn func(o, n sourceColumn, at string)) {
	c.sourcePairs(func(o, n SourceShape, p string) {
		for j, col := range n.Columns {
			if prev, ok := o.Columns.Lookup(col.Name); ok {
				fn(sourceColumn{o, prev}, sourceColumn{n, col}, fmt.Sprintf("%s.schema.columns[%d]", p, j))
			}
		}
	})
}

var kafkaKeyFormat = fieldRule[SourceShape]{
	pairs: (*change).sourcePairs, when: sourceOf(v1.SourceKafka), field: ".kafka.keyFormat",
	same:  func(o, n SourceShape) bool { return o.KeyFormat == n.KeyFormat },
	value: func(s SourceShape) string { return cmp.Or(s.KeyFormat, string(v1.KafkaKeyString)) }, severity: Warning,
	message: func(_ *change, d diff[SourceShape]) string {
		return fmt.Sprintf("Source %q now decodes record keys as %s instead of %s into _key, from the next batch on, including a batch replayed at restart, while its offsets stay valid.",
			d.n.Name, d.new, d.old)
	},
	remedy: func(_ *change, d diff[SourceShape]) string {
		return fmt.Sprintf("Revert %s to %s unless the topic's keys changed format.", d.path, d.old)
	},
}
