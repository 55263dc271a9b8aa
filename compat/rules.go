package compat

import "slices"

// Rule is one restart-compatibility rule: a small check of the old shape against the new
// spec, and its documentation. docs/compatibility.md is generated from Rules.
type Rule struct {
	// ID names the rule in findings; it never changes once released.
	ID string
	// Area groups rules in the documentation.
	Area string
	// Title says in a few words what change the rule is about.
	Title string
	// Severities lists the severities the rule's findings can have, from the most common.
	Severities []Severity
	// Description says what the rule judges and why, including where Lockstep departs from
	// Spark.
	Description string
	// Example is a change the rule judges, as spec fragments.
	Example Example
	// Fresh marks a rule that judges the new spec alone: Check runs it with no checkpoint
	// yet too, so that a fresh verdict (and `lockstep plan` before the first run) carries
	// its findings. The other rules compare with the checkpoint and run only when there is
	// one.
	Fresh bool

	check func(*change) []Finding
}

// Example is a change as two YAML fragments of a spec.
type Example struct {
	Old, New string
}

// RuleSinkGuarantee is the id of the rule that judges a change of the delivery guarantee;
// clients that treat its findings apart (the Terraform plan) name it by this constant.
const RuleSinkGuarantee = "sink-guarantee"

// Areas of rules, in the order of the documentation.
const (
	AreaQuery     = "The query as a whole"
	AreaSources   = "Sources"
	AreaState     = "Stateful steps"
	AreaJoins     = "Joins"
	AreaWatermark = "Watermark"
	AreaOutput    = "Output and sink"
	AreaSettings  = "Settings"
)

// Rules returns every rule, in the order Check runs them. It returns a new slice on each call,
// which the caller may change.
func Rules() []Rule {
	out := slices.Clone(rules)
	for i := range out {
		out[i].Severities = slices.Clone(out[i].Severities)
	}
	return out
}

// rules is the rule table: data, read by Rules and Check and never changed.
var rules = []Rule{
	// The query as a whole.
	{
		ID: "invalid-spec", Area: AreaQuery, Title: "The new spec does not validate",
		Severities:  []Severity{Rejected},
		Description: "A spec that does not validate has no shape, so nothing can be compared; Check rejects it and stops. `lockstep plan` refuses such a spec with exit code 2 before judging it.",
		Example:     Example{Old: "sink: {files: {path: /out, format: parquet}}", New: "sink: {}"},
		check:       checkInvalidSpec,
	},
	{
		ID: "shape-version", Area: AreaQuery, Title: "The checkpoint was recorded by a newer Lockstep",
		Severities:  []Severity{Rejected},
		Description: "A shape whose version is newer than this Lockstep reads may record things this version does not know to compare, so it refuses to judge rather than allow a change it cannot see. ParseShape refuses such a shape too.",
		Example:     Example{Old: `{"version": 4, …}  (shape/<N> in the checkpoint)`, New: "any spec"},
		check:       checkShapeVersion,
	},

	// Sources.
	{
		ID: "source-added", Area: AreaSources, Title: "A source is added",
		Severities:  []Severity{Warning, Rejected},
		Description: "Sources are keyed by name, so a new name is a new source: it starts at its starting position (Kafka startingOffsets, Delta startingVersion, every file already in a files source's folder, value 0 for rate, event 0 for nexmark) and its rows join the query, and its state, from the next batch. It is a warning because the starting position decides whether history is read. On the spark runtime it is rejected: Spark 4.2 refuses a restart with more sources than its offsets log records (observed by the oracle, docs/compatibility-spark.md).",
		Example:     Example{Old: "sources: [{name: orders, kafka: {topics: [orders]}}]", New: "sources: [{name: orders, …}, {name: returns, kafka: {topics: [returns], startingOffsets: earliest}}]"},
		check:       checkSourceAdded,
	},
	{
		ID: "source-removed", Area: AreaSources, Title: "A source is removed",
		Severities:  []Severity{Warning, Rejected},
		Description: "A removed source is no longer read: what it has not read is never read, and what it contributed to state stays. Its offsets stay in older log entries; the name, if added back later, starts afresh at its starting position. A warning, since the query goes on correctly with the remaining sources; on the spark runtime it is rejected, as Spark 4.2 refuses a restart with fewer sources than its offsets log records (observed by the oracle).",
		Example:     Example{Old: "sources: [{name: orders, …}, {name: returns, …}]", New: "sources: [{name: orders, …}]"},
		check:       checkSourceRemoved,
	},
	{
		ID: "source-renamed", Area: AreaSources, Title: "A source is renamed",
		Severities:  []Severity{Rejected, Warning},
		Description: "A source that disappears while a source with the same identity (kind and topics, folder and format, or table) appears under a new name is a rename. Offsets are keyed by name, so the renamed source starts afresh at its starting position: it reads again what was read, or skips what was not. Rejected when the query keeps state, which would count re-read rows twice; a warning for a stateless query, whose sink receives duplicates or misses rows. Spark's positional sources make this mistake invisible.",
		Example:     Example{Old: "sources: [{name: orders, kafka: {topics: [orders]}}]", New: "sources: [{name: order-events, kafka: {topics: [orders]}}]"},
		check:       checkSourceRenamed,
	},
	{
		ID: "source-kind", Area: AreaSources, Title: "A source's kind changes under the same name",
		Severities:  []Severity{Rejected},
		Description: "The checkpoint holds offsets of one kind of source under the name (Kafka partition offsets, a files log, Delta versions, rate seconds); they mean nothing to another kind. Spark forbids changing the type of a source too. The data can be read under a new source name instead.",
		Example:     Example{Old: "sources: [{name: orders, kafka: {topics: [orders]}}]", New: "sources: [{name: orders, files: {path: s3://landing/orders, format: json}}]"},
		check:       sourceKind.check,
	},
	{
		ID: "kafka-topics", Area: AreaSources, Title: "A Kafka source's topics or pattern change",
		Severities:  []Severity{Rejected},
		Description: "A Kafka source's identity is its topic set (order does not matter) or pattern. Its checkpointed offsets cover the partitions it read: partitions of new topics would start at earliest whatever startingOffsets says, and partitions no longer read would be reported as lost data. Spark calls this \"generally not allowed\" with unpredictable results; Lockstep rejects it. Read new topics as a new source instead.",
		Example:     Example{Old: "kafka: {topics: [orders]}", New: "kafka: {topics: [orders, returns]}"},
		check:       kafkaTopics.check,
	},
	{
		ID: "files-path", Area: AreaSources, Title: "A files source's folder changes",
		Severities:  []Severity{Rejected},
		Description: "A files source's checkpoint is its log of the files it has read in its folder. Under another folder that log is meaningless: every file there would be read as new, or files would be skipped as already read. Rejected, as Spark's \"changing the subscribed files\".",
		Example:     Example{Old: "files: {path: s3://landing/orders, format: json}", New: "files: {path: s3://landing/orders-v2, format: json}"},
		check:       filesPath.check,
	},
	{
		ID: "files-format", Area: AreaSources, Title: "A files source's format changes",
		Severities:  []Severity{Rejected},
		Description: "Folder and format together identify a files source's dataset. A new format on the same folder means either the files not read yet no longer parse, or the folder now holds another dataset that the checkpoint's log knows nothing of. Read the new files as a new source instead.",
		Example:     Example{Old: "files: {path: s3://landing/orders, format: json}", New: "files: {path: s3://landing/orders, format: csv}"},
		check:       filesFormat.check,
	},
	{
		ID: "delta-path", Area: AreaSources, Title: "A Delta source's table changes",
		Severities:  []Severity{Rejected},
		Description: "A Delta source's offsets are positions in one table's transaction log (version, index); they mean nothing for another table.",
		Example:     Example{Old: "delta: {path: s3://lake/orders}", New: "delta: {path: s3://lake/orders_v2}"},
		check:       deltaPath.check,
	},
	{
		ID: "kafka-format", Area: AreaSources, Title: "A Kafka source's value format changes",
		Severities:  []Severity{Warning},
		Description: "The offsets stay valid, but record values are decoded the new way from the next batch on, including a batch replayed at restart. A warning: correct only if the topic's records changed format at that point. A change of columns that comes with it is judged by the schema and state rules.",
		Example:     Example{Old: "kafka: {topics: [orders], format: json}", New: "kafka: {topics: [orders], format: csv}"},
		check:       kafkaFormat.check,
	},
	{
		ID: "kafka-key-format", Area: AreaSources, Title: "A Kafka source's key format changes",
		Severities:  []Severity{Warning},
		Description: "The offsets stay valid, but record keys are decoded the new way into _key from the next batch on, including a batch replayed at restart: a key that read as its bytes reads as its decoded text, or the other way round. A warning: correct only if the topic's keys changed format at that point; a stateful step keyed by _key sees new keys for the same records.",
		Example:     Example{Old: "kafka: {topics: [orders], format: avro, …}", New: "kafka: {topics: [orders], format: avro, keyFormat: avro, …}"},
		check:       kafkaKeyFormat.check,
	},
	{
		ID: "kafka-subject", Area: AreaSources, Title: "A Kafka source's Schema Registry subject changes",
		Severities:  []Severity{Allowed},
		Description: "A source in format avro decodes each record by the schema id the record carries, so its offsets and its reading stay as they were; the subject only names the schema whose latest version the start guard checks the columns against. Allowed: the next start checks the new subject.",
		Example:     Example{Old: "kafka: {topics: [orders], format: avro, schemaRegistry: {url: …}}", New: "kafka: {topics: [orders], format: avro, schemaRegistry: {url: …, subject: orders-v2}}"},
		check:       kafkaSubject.check,
	},
	{
		ID: "rate-limit", Area: AreaSources, Title: "A source's rate limit changes",
		Severities:  []Severity{Allowed},
		Description: "maxOffsetsPerTrigger (Kafka), maxFilesPerTrigger (files, Delta) and rowsPerSecond (rate) only size future batches: a new limit applies from the next newly planned batch, while a batch replayed at restart keeps its logged range. Allowed, as in Spark.",
		Example:     Example{Old: "kafka: {topics: [orders], maxOffsetsPerTrigger: 10000}", New: "kafka: {topics: [orders], maxOffsetsPerTrigger: 50000}"},
		check:       checkRateLimit,
	},
	{
		ID: "starting-position", Area: AreaSources, Title: "A source's starting position changes",
		Severities:  []Severity{Warning},
		Description: "startingOffsets (Kafka) and startingVersion (Delta) are read only when the checkpoint first sees a source name; a source already in the checkpoint continues from its offsets. Spark ignores the change silently, which is a classic surprise (\"how do I rewind?\"); Lockstep says so. To rewind, read the source under a new name or start fresh.",
		Example:     Example{Old: "kafka: {topics: [orders], startingOffsets: latest}", New: "kafka: {topics: [orders], startingOffsets: earliest}"},
		check:       checkStartingPosition,
	},
	{
		ID: "source-columns", Area: AreaSources, Title: "A source's schema gains or loses a column",
		Severities:  []Severity{Allowed},
		Description: "Records read from the next batch on are parsed with the new schema. The checkpoint does not depend on a source's columns themselves: what state depends on (key and input columns with their types) is recorded per stateful step and judged by those rules, as Spark checks only the state's schema.",
		Example:     Example{Old: "columns: [{name: order_id, type: string}]", New: "columns: [{name: order_id, type: string}, {name: coupon, type: string}]"},
		check:       checkSourceColumns,
	},
	{
		ID: "source-column-type", Area: AreaSources, Title: "A source column's type changes",
		Severities:  []Severity{Warning},
		Description: "Records are parsed with the new type from the next batch on, including a batch replayed at restart. A warning on its own; if the column feeds a stateful step's keys or aggregates, key-type or aggregate-input-type rejects the change too.",
		Example:     Example{Old: "{name: qty, type: long}", New: "{name: qty, type: double}"},
		check:       sourceColumnType.check,
	},

	// Stateful steps.
	{
		ID: "operator-added", Area: AreaState, Title: "A stateful step is added",
		Severities:  []Severity{Rejected},
		Description: "A new aggregate or dropDuplicates would start with empty state while the sources continue from their offsets, so its results would silently leave out everything read before. Spark fails such a restart with a missing state directory; Lockstep says why before it runs.",
		Example:     Example{Old: "transform: [{filter: \"amount > 0.0\"}]", New: "transform: [{filter: \"amount > 0.0\"}, {dropDuplicates: {columns: [order_id]}}]"},
		check:       checkOperatorAdded,
	},
	{
		ID: "operator-removed", Area: AreaState, Title: "A stateful step is removed",
		Severities:  []Severity{Rejected},
		Description: "Removing an aggregate switches the sink mid-stream from groups to raw rows; removing a dropDuplicates lets repeats of rows seen before the restart through. Either way the output changes meaning without a trace, and the state is left unused. Spark's operator check rejects it too.",
		Example:     Example{Old: "transform: [{dropDuplicates: {columns: [order_id]}}, …]", New: "transform: […]"},
		check:       checkOperatorRemoved,
	},
	{
		ID: "operator-renamed", Area: AreaState, Title: "A stateful step's id changes",
		Severities:  []Severity{Rejected},
		Description: "State lives under the step's id: its name, else its ordinal among the stateful steps. Naming an unnamed step, renaming it, or adding or removing an unnamed stateful step before it changes the id, so the step would start empty. Detected when a step of the same kind, keys and aggregates reappears under another id. Name stateful steps from the start to make inserting one safe.",
		Example:     Example{Old: "dropDuplicates: {columns: [order_id]}   # stored as #0", New: "dropDuplicates: {name: dedup, columns: [order_id]}"},
		check:       checkOperatorRenamed,
	},
	{
		ID: "operator-reordered", Area: AreaState, Title: "Stateful steps change order",
		Severities:  []Severity{Rejected},
		Description: "Each step's state was built from the rows the steps before it let through (a dropDuplicates before an aggregate decides what the aggregate counted), so reordering changes what every state means.",
		Example:     Example{Old: "[{dropDuplicates: {name: by-id, …}}, {dropDuplicates: {name: by-key, …}}]", New: "[{dropDuplicates: {name: by-key, …}}, {dropDuplicates: {name: by-id, …}}]"},
		check:       checkOperatorReordered,
	},
	{
		ID: "operator-kind", Area: AreaState, Title: "A stateful step's kind changes under the same id",
		Severities:  []Severity{Rejected},
		Description: "The checkpoint holds an aggregate's or a dropDuplicates' state under the id; one cannot be read as the other. Spark 4 detects this by operator name.",
		Example:     Example{Old: "{dropDuplicates: {name: s, columns: [page]}}", New: "{aggregate: {name: s, groupBy: [{column: page}], …}}"},
		check:       operatorKind.check,
	},
	{
		ID: "key-columns", Area: AreaState, Title: "The state key's columns change",
		Severities:  []Severity{Rejected},
		Description: "An aggregate's grouping keys and a dropDuplicates' columns are its state key. A column added, removed or replaced means the keys in the state are never found again: groups restart from zero, and rows seen before pass dropDuplicates again. Lockstep records key names, so it also rejects dedup on another column of the same type, which Spark's type-only check lets pass (a plain Spark checkpoint records the names too).",
		Example:     Example{Old: "dropDuplicates: {columns: [order_id]}", New: "dropDuplicates: {columns: [click_id]}"},
		check:       keyColumnsChange.check,
	},
	{
		ID: "key-order", Area: AreaState, Title: "The state key's columns change order",
		Severities:  []Severity{Rejected},
		Description: "The order of grouping keys and dedup columns is part of the encoded state key (DESIGN §2), so the same columns in another order find no key again.",
		Example:     Example{Old: "groupBy: [{column: country}, {column: city}]", New: "groupBy: [{column: city}, {column: country}]"},
		check:       keyOrder.check,
	},
	{
		ID: "key-type", Area: AreaState, Title: "A state key column's type changes",
		Severities:  []Severity{Rejected},
		Description: "Keys are stored encoded by their type; a key column that becomes another type (through a source's schema or a select) would never match the keys in the state. Spark rejects it too (STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE).",
		Example:     Example{Old: "{name: country, type: string}", New: "{name: country, type: long}"},
		check:       keyType.check,
	},
	{
		ID: "window-column", Area: AreaState, Title: "A window's time column changes",
		Severities:  []Severity{Rejected},
		Description: "The windows in the state were assigned by the old column's event time; rows would be added to windows of another clock.",
		Example:     Example{Old: "window: {column: ts, duration: 5m}", New: "window: {column: received_at, duration: 5m}"},
		check:       windowColumn.check,
	},
	{
		ID: "window-size", Area: AreaState, Title: "A window's duration changes",
		Severities:  []Severity{Rejected},
		Description: "The state holds windows of the old length; the output would mix both lengths and the open windows would never be completed. Spark lets this pass because the state's types match; Lockstep records the duration (compared by value: 5m equals 300s), and reads it from the state rows of a plain Spark checkpoint (end − start of the windows there).",
		Example:     Example{Old: "window: {column: ts, duration: 5m}", New: "window: {column: ts, duration: 10m}"},
		check:       windowSize.check,
	},
	{
		ID: "window-slide", Area: AreaState, Title: "A window's slide changes",
		Severities:  []Severity{Rejected},
		Description: "Each row in the state was added to the windows of the old slide (tumbling: one window; sliding: several), so open windows would miss rows or count them twice. A slide equal to the duration is tumbling.",
		Example:     Example{Old: "window: {column: ts, duration: 10m}", New: "window: {column: ts, duration: 10m, slide: 5m}"},
		check:       windowSlide.check,
	},
	{
		ID: "session-column", Area: AreaState, Title: "A session window's time column changes",
		Severities:  []Severity{Rejected},
		Description: "The open sessions in the state span event times of the old column; rows would extend and merge them by another clock. The engine refuses it too: the column is part of the operator's fingerprint.",
		Example:     Example{Old: "session: {column: ts, gap: 5m}", New: "session: {column: received_at, gap: 5m}"},
		check:       sessionColumn.check,
	},
	{
		ID: "session-gap", Area: AreaState, Title: "A session window's gap changes",
		Severities:  []Severity{Rejected},
		Description: "Each open session in the state ends at its newest row plus the old gap, and its rows were merged by that gap: with a longer gap open sessions would close too early and miss merges, with a shorter one sessions already merged hold rows the new gap keeps apart. Lockstep records the gap (compared by value: 5m equals 300s) or the gapExpr (compared without blanks); the engine refuses it too (the gap is part of the operator's fingerprint). Switching between a window and a session changes the grouping keys (key-columns).",
		Example:     Example{Old: "session: {column: ts, gap: 5m}", New: "session: {column: ts, gap: 10m}"},
		check:       sessionGap.check,
	},
	{
		ID: "aggregate-function", Area: AreaState, Title: "An aggregate's function changes",
		Severities:  []Severity{Rejected},
		Description: "The state holds each group's partial result of the old function; max→min or sum→avg would silently continue from it. Spark lets same-typed changes pass; Lockstep records the function (of a plain Spark checkpoint, it reads them from the aggregation buffer's columns: sum, count, max, min, and sum, count for avg, which fits sum and count alike).",
		Example:     Example{Old: "{name: top, function: max, column: amount}", New: "{name: top, function: min, column: amount}"},
		check:       aggregateFunction.check,
	},
	{
		ID: "aggregate-input", Area: AreaState, Title: "An aggregate's input column changes",
		Severities:  []Severity{Rejected},
		Description: "The state holds results over the old input; sum(a)→sum(b) would silently mix both in every group. Spark lets this pass when the types match; Lockstep records the input column. A plain Spark checkpoint does not: there it is a spark-unrecorded warning.",
		Example:     Example{Old: "{name: revenue, function: sum, column: amount}", New: "{name: revenue, function: sum, column: net_amount}"},
		check:       aggregateInput.check,
	},
	{
		ID: "aggregate-input-type", Area: AreaState, Title: "An aggregate input's type changes",
		Severities:  []Severity{Rejected},
		Description: "The partial results in the state have the old input's type (a long sum cannot continue as a double sum). Spark rejects it as a value schema change.",
		Example:     Example{Old: "{name: qty, type: long}  → sum(qty)", New: "{name: qty, type: double}  → sum(qty)"},
		check:       aggregateInputType.check,
	},
	{
		ID: "aggregate-added", Area: AreaState, Title: "An aggregate is added to an aggregate step",
		Severities:  []Severity{Rejected},
		Description: "Every group in the state would start the new aggregate from nothing, so its value would silently cover only rows read after the restart. Aggregates are matched by function and input, so an insertion is told apart from a change.",
		Example:     Example{Old: "aggregates: [{name: orders, function: count}]", New: "aggregates: [{name: orders, function: count}, {name: revenue, function: sum, column: amount}]"},
		check:       checkAggregateAdded,
	},
	{
		ID: "aggregate-removed", Area: AreaState, Title: "An aggregate is removed from an aggregate step",
		Severities:  []Severity{Rejected},
		Description: "The state of every group holds the step's values in order, so it no longer matches the step. Spark rejects it as a value schema change.",
		Example:     Example{Old: "aggregates: [{name: orders, function: count}, {name: revenue, function: sum, column: amount}]", New: "aggregates: [{name: orders, function: count}]"},
		check:       checkAggregateRemoved,
	},
	{
		ID: "aggregate-renamed", Area: AreaState, Title: "Only an aggregate's output name changes",
		Severities:  []Severity{Warning},
		Description: "Aggregate values are stored in order, not by name, so the state is unaffected (Spark allows this too: SPARK-27237). A warning, because the sink receives the column under its new name from the next batch.",
		Example:     Example{Old: "{name: revenue, function: sum, column: amount}", New: "{name: total, function: sum, column: amount}"},
		check:       aggregateRenamed.check,
	},
	{
		ID: "state-input-expression", Area: AreaState, Title: "The expression computing a key or aggregate input changes",
		Severities:  []Severity{Warning},
		Description: "Lockstep records how each key and aggregate input column is computed (the select expression, followed through plain copies and renames). When the name and type stay but the expression changes (country.upperAscii() → country), keys already in the state were computed the old way, so a group can appear twice. A warning, not a rejection: the state is still readable, and the change may be a deliberate fix. Spark does not see this at all. Blank changes inside an expression do not count.",
		Example:     Example{Old: "select: [{name: country, expr: \"country.upperAscii()\"}, …]", New: "select: [{name: country, expr: country}, …]"},
		check:       checkStateInputExpression,
	},

	// Watermark.
	{
		ID: "watermark-column", Area: AreaWatermark, Title: "The watermark's column changes",
		Severities:  []Severity{Rejected, Allowed},
		Description: "The checkpoint's watermark was computed from the old column, never moves back, and decides which state is evicted; another column would judge lateness and evict state by another clock. Rejected when the query keeps state; allowed when it keeps none, since the watermark then decides nothing.",
		Example:     Example{Old: "watermark: {column: ts, delay: 10m}", New: "watermark: {column: received_at, delay: 10m}"},
		check:       checkWatermarkColumn,
	},
	{
		ID: "watermark-removed", Area: AreaWatermark, Title: "The watermark is removed",
		Severities:  []Severity{Rejected, Allowed},
		Description: "The stateful steps evicted state by it; without it they would keep every key from now on next to keys already evicted, and late rows would re-create groups already written. Rejected when the query keeps state (DESIGN §5: removing the watermark column is rejected); allowed otherwise.",
		Example:     Example{Old: "[{watermark: {column: ts, delay: 10m}}, {aggregate: …}]", New: "[{aggregate: …}]"},
		check:       checkWatermarkRemoved,
	},
	{
		ID: "state-eviction", Area: AreaWatermark, Title: "A stateful step starts or stops evicting by the watermark",
		Severities:  []Severity{Rejected},
		Description: "A stateful step evicts its state by the watermark when one of its keys or its window is the watermark's column. Each step's state metadata in the checkpoint records how it evicts, and the engine refuses to open state under another eviction, so a watermark added on a step's key or window column, or a select that stops copying the event-time column to the step, is rejected here rather than failing at start. (A watermark that no step evicts by is watermark-added.)",
		Example:     Example{Old: "[{aggregate: {groupBy: [{window: {column: ts, duration: 5m}}], …}}]   # update mode", New: "[{watermark: {column: ts, delay: 10m}}, {aggregate: {groupBy: [{window: {column: ts, duration: 5m}}], …}}]"},
		check:       checkStateEviction,
	},
	{
		ID: "watermark-added", Area: AreaWatermark, Title: "A watermark is added",
		Severities:  []Severity{Warning, Allowed},
		Description: "From the next batch rows later than the delay are dropped before the stateful steps; well defined, but the user must know. When a stateful step would also evict by it (its key or window column), state-eviction rejects the change instead. Allowed when the query keeps no state.",
		Example:     Example{Old: "[{aggregate: …}]", New: "[{watermark: {column: ts, delay: 10m}}, {aggregate: …}]"},
		check:       checkWatermarkAdded,
	},
	{
		ID: "watermark-delay", Area: AreaWatermark, Title: "The watermark's delay changes",
		Severities:  []Severity{Warning, Allowed},
		Description: "The delay only affects how the watermark moves from now on (Spark restores the watermark from the checkpoint and only ever raises it): a larger delay takes effect once event time has advanced by the difference; a smaller one moves the watermark forward at the next batch, dropping rows that are now late and evicting (in append mode, writing) the state it passes. A warning when the query keeps state, else allowed.",
		Example:     Example{Old: "watermark: {column: ts, delay: 10m}", New: "watermark: {column: ts, delay: 1h}"},
		check:       checkWatermarkDelay,
	},

	{
		ID: "unbounded-state", Area: AreaWatermark, Title: "A stateful step's state grows without bound",
		Severities: []Severity{Warning},
		Fresh:      true,
		Description: "A dropDuplicates whose columns do not include the watermark's event-time column, or an aggregate none of whose grouping keys or windows is on it, is never evicted by the watermark: it keeps every key it sees, so its state, in memory and in the checkpoint, grows with every new key. So does a grouped aggregate in complete mode, which must keep every group to write the whole result. A warning, since the results are correct. " +
			"The rule judges the new query alone, so it runs with no checkpoint yet too (`lockstep plan` warns before the first run) and on every restart while the step stays unbounded. The remedy is a watermark on an event-time column that is one of the dedup's columns, or a window (or key) of the aggregate's groupBy, in update or append mode. Once a checkpoint holds the step's state the step cannot start evicting (state-eviction rejects that), so the remedy then needs a fresh start.",
		Example: Example{Old: "(no checkpoint yet)", New: "[{dropDuplicates: {columns: [order_id]}}, …]   # no watermark"},
		check:   checkUnboundedState,
	},

	// Output and sink.
	{
		ID: "output-mode", Area: AreaOutput, Title: "The output mode changes",
		Severities: []Severity{Warning, Rejected, Allowed},
		Description: "Spark does not check this for aggregations at all. Lockstep decides by what the state holds: without an aggregate, append and update both write every row once (allowed). With an aggregate, a change to complete is rejected when there is a watermark, because groups it already evicted are gone and the \"complete\" result would silently miss them; without a watermark nothing was evicted (a warning). " +
			"append↔update and complete→append/update keep the state valid but change what the sink receives from the next batch (every change of a group instead of one final row, or the reverse, with groups written once more; or only changes instead of the whole result): a warning.",
		Example: Example{Old: "outputMode: update   # with a watermark", New: "outputMode: complete"},
		check:   checkOutputMode,
	},
	{
		ID: "output-columns", Area: AreaOutput, Title: "The sink's columns change",
		Severities:  []Severity{Warning, Allowed},
		Description: "A select or aggregate change that gives the sink other columns is allowed by the checkpoint (Spark: \"only if the output sink allows the schema change\"), but the sink must take it: a Delta table's schema must accept the new columns, a folder ends up with files of two schemas, consumers see a new record form. A warning; allowed for console. Renamed aggregate outputs are reported by aggregate-renamed instead.",
		Example:     Example{Old: "select: [{name: id, expr: id}]", New: "select: [{name: id, expr: id}, {name: total, expr: amount}]"},
		check:       checkOutputColumns,
	},
	{
		ID: "sink-kind", Area: AreaOutput, Title: "The sink's kind changes",
		Severities:  []Severity{Warning, Rejected, Allowed},
		Description: "See SinkSwitch and the matrix below. To console: allowed (it keeps nothing). To kafka or webhook: a warning, they see only new data (Spark allows file→Kafka and Kafka↔foreach). To files or delta: rejected, because a folder or table is read as the query's whole output and the new one would hold only rows from the next batch on with nothing marking the missing history (Spark forbids Kafka→file); except to delta in complete mode, which rewrites the whole result every batch (a warning).",
		Example:     Example{Old: "sink: {kafka: {topic: revenue, …}}", New: "sink: {files: {path: s3://out/revenue}}"},
		check:       checkSinkKind,
	},
	{
		ID: "files-sink-path", Area: AreaOutput, Title: "The files sink's folder changes",
		Severities:  []Severity{Rejected},
		Description: "The new folder would receive only rows from the next batch on while the old one keeps the rows before, so neither holds the query's whole output; Spark forbids it too. Starting fresh with the new folder gives it the whole output from the sources' starting positions.",
		Example:     Example{Old: "files: {path: s3://out/orders}", New: "files: {path: s3://out/orders-v2}"},
		check:       filesSinkPath.check,
	},
	{
		ID: "files-sink-format", Area: AreaOutput, Title: "The files sink's format changes",
		Severities:  []Severity{Rejected},
		Description: "The folder would hold files of two formats. Lockstep's own readers go by the manifest, which names each file's format, and read it whole (the planner's oracle sees Spark's rows right); Lockstep is stricter because every other reader of the folder reads it by one format (spark.read.json, DuckDB's read_json) and would see part of the output, or fail.",
		Example:     Example{Old: "files: {path: s3://out/orders, format: parquet}", New: "files: {path: s3://out/orders, format: json}"},
		check:       filesSinkFormat.check,
	},
	{
		ID: "delta-sink-path", Area: AreaOutput, Title: "The Delta sink's table changes",
		Severities:  []Severity{Rejected, Warning},
		Description: "As files-sink-path: neither table would hold the whole output. In complete mode the new table receives the whole result at the next batch, so it is only a warning.",
		Example:     Example{Old: "delta: {path: s3://lake/revenue}", New: "delta: {path: s3://lake/revenue_v2}"},
		check:       checkDeltaSinkPath,
	},
	{
		ID: "delta-sink-partitioning", Area: AreaOutput, Title: "The Delta sink's partition columns change",
		Severities:  []Severity{Rejected},
		Description: "The table was created with the old partitioning; appending cannot change a Delta table's partitioning, so every write of the restarted query would fail.",
		Example:     Example{Old: "delta: {path: s3://lake/revenue, partitionColumns: [country]}", New: "delta: {path: s3://lake/revenue}"},
		check:       deltaSinkPartitioning.check,
	},
	{
		ID: "postgres-sink-table", Area: AreaOutput, Title: "The PostgreSQL sink's table, server or database changes",
		Severities:  []Severity{Rejected, Warning},
		Description: "As delta-sink-path: neither table would hold the whole output. The sink's identity is the server and database its connection string names (host:port/database) and the table: the engine records the server from its environment, the admission webhook and the controller read it from the connection's Secret, lockstep plan from the variable in its environment. A renamed Secret or variable that names the same server and database is no change. Where the server cannot be read (a checkpoint recorded without it, a Secret the webhook cannot read, an unset variable), the Secret's or variable's name stands in for it, and the finding says so. In complete mode the new table receives the whole result at the next batch, so it is only a warning.",
		Example:     Example{Old: "postgres: {table: revenue, connection: {secretName: db}}", New: "postgres: {table: revenue_v2, connection: {secretName: db}}"},
		check:       checkPostgresSinkTable,
	},
	{
		ID: "sink-update-keys", Area: AreaOutput, Title: "The key an update-mode delta or postgres sink upserts by changes",
		Severities:  []Severity{Rejected},
		Description: "The table holds one row per old key; upserting by another key would leave rows that no new row replaces. Changing an aggregation's grouping keys is also refused by the state rules.",
		Example:     Example{Old: "delta: {path: s3://lake/users, mergeKeys: [user_id]}", New: "delta: {path: s3://lake/users, mergeKeys: [email]}"},
		check:       checkSinkKeys,
	},
	{
		ID: "kafka-sink-topic", Area: AreaOutput, Title: "The Kafka sink's topic changes",
		Severities:  []Severity{Warning},
		Description: "Allowed by Spark: the new topic sees only records from the next batch on (a batch replayed at restart included), and the old topic stops receiving them. A warning for the consumers of both.",
		Example:     Example{Old: "kafka: {topic: revenue, …}", New: "kafka: {topic: revenue-v2, …}"},
		check:       kafkaSinkTopic.check,
	},
	{
		ID: "kafka-sink-format", Area: AreaOutput, Title: "The Kafka sink's value format changes",
		Severities:  []Severity{Warning},
		Description: "From the next batch on (a batch replayed at restart included) the topic receives records in the new format, after the records already written in the old one: its consumers must read both, or move to a new topic. Format avro registers the output columns' schema before the first record; a schema the subject's compatibility rule refuses stops the sink at start, naming the subject, the rule and the field.",
		Example:     Example{Old: "kafka: {topic: revenue, format: json}", New: "kafka: {topic: revenue, format: avro, schemaRegistry: {url: …}}"},
		check:       kafkaSinkFormat.check,
	},
	{
		ID: "kafka-sink-key-format", Area: AreaOutput, Title: "The Kafka sink's key format changes",
		Severities:  []Severity{Warning},
		Description: "From the next batch on (a batch replayed at restart included) record keys are written in the new format, after the keys already written in the old one: consumers' key deserializers must read both, and a key that changes bytes may go to another partition, so the records of one key lose their order across the change. Formats avro and protobuf register the key schema under <topic>-key before the first record.",
		Example:     Example{Old: "kafka: {topic: revenue, keyColumn: country}", New: "kafka: {topic: revenue, keyColumn: country, keyFormat: avro, schemaRegistry: {url: …}}"},
		check:       kafkaSinkKeyFormat.check,
	},
	{
		ID: "kafka-sink-subject", Area: AreaOutput, Title: "The Kafka sink's Schema Registry subject changes",
		Severities:  []Severity{Warning},
		Description: "The value schema is registered under the new subject from the next start on and judged against that subject's history, not the old one's: records in the topic then carry ids of schemas from two subjects, and consumers that look up the old subject (for their reader schema or its compatibility) no longer see the sink's changes.",
		Example:     Example{Old: "kafka: {topic: revenue, format: avro, schemaRegistry: {url: …}}", New: "kafka: {topic: revenue, format: avro, schemaRegistry: {url: …, subject: revenue-v2}}"},
		check:       kafkaSinkSubject.check,
	},
	{
		ID: "kafka-sink-schema-version", Area: AreaOutput, Title: "The Kafka sink's pinned schema version changes",
		Severities:  []Severity{Warning},
		Description: "From the next batch on (a batch replayed at restart included) records carry the id of the new version, or of the schema derived from the output columns when the pin is removed; consumers must be able to read both. The sink checks at start that the version holds every output column.",
		Example:     Example{Old: "kafka: {topic: revenue, format: avro, schemaRegistry: {url: …, version: 3}}", New: "kafka: {topic: revenue, format: avro, schemaRegistry: {url: …, version: 4}}"},
		check:       kafkaSinkSchemaVersion.check,
	},
	{
		ID: "webhook-url", Area: AreaOutput, Title: "The webhook sink's URL changes",
		Severities:  []Severity{Warning},
		Description: "The new receiver gets batches from the next one on, with Idempotency-Keys (<query id>:<batch id>) continuing the same sequence; the old one stops receiving them. The shape records the URL without user information, query or fragment, which may hold credentials.",
		Example:     Example{Old: "webhook: {url: https://hooks.example.com/a}", New: "webhook: {url: https://hooks.example.com/b}"},
		check:       webhookURL.check,
	},
	{
		ID: RuleSinkGuarantee, Area: AreaOutput, Title: "The delivery guarantee changes",
		Severities:  []Severity{Warning, Allowed},
		Description: "The guarantee follows from the sources and the sink (DESIGN §4). A weaker one (exactly-once → at-least-once, e.g. turning off the Kafka sink's exactlyOnce, or a switch to webhook or console) is a warning; a stronger one is allowed.",
		Example:     Example{Old: "kafka: {topic: revenue, exactlyOnce: true}", New: "kafka: {topic: revenue}"},
		check:       checkSinkGuarantee,
	},

	// Joins.
	{
		ID: "join-added", Area: AreaJoins, Title: "A join is added",
		Severities:  []Severity{Rejected, Warning},
		Description: "A stream join is a stateful operator: added, its buffered rows would start empty while the sources continue from their offsets, so rows read before the restart would never be matched. Rejected, in a stateless query too (its stream is then a new source); Spark refuses such a restart, as a missing state. A static join keeps no state, so it is judged as a filter: a warning, in a stateful query too. Rows are joined from the next batch on, a batch replayed at restart included; the state keeps what it built from unjoined rows, and the rows already written stay unjoined. Spark runs the same (the planner's oracle sees the rows of a run that joined from the restart on).",
		Example:     Example{Old: "transform: [{filter: \"amount > 0.0\"}]", New: "transform: [{filter: \"amount > 0.0\"}, {join: {name: customers, keys: [{left: customer_id, right: id}], static: {delta: {path: s3://lake/customers}, …}, rightPrefix: c_}}]"},
		check:       checkJoinAdded,
	},
	{
		ID: "join-removed", Area: AreaJoins, Title: "A join is removed",
		Severities:  []Severity{Rejected, Warning},
		Description: "The mirror of join-added: a stream join removed is rejected (its buffered rows and the outer rows still due are lost, and its state would stay unused). A static join removed is a warning, as a removed filter: from the next batch on rows reach the stateful steps and the sink unjoined, and the state keeps what it built from joined rows.",
		Example:     Example{Old: "transform: [{join: {name: customers, …}}, {aggregate: {…}}]", New: "transform: [{aggregate: {…}}]"},
		check:       checkJoinRemoved,
	},
	{
		ID: "join-renamed", Area: AreaJoins, Title: "A join's id changes",
		Severities:  []Severity{Rejected, Warning},
		Description: "A join is known by its name, else join-<ordinal among the joins>. A stream join's buffered rows live under the id: under a new one it would start empty, so the change is rejected. A static join's only record is its snapshot's version: under a new id the next batch reads a fresh snapshot, a warning. Detected when a join of the same type, side, keys and time bound reappears under another id.",
		Example:     Example{Old: "join: {keys: […], stream: {source: clicks, …}}   # stored as join-0", New: "join: {name: imp-clicks, keys: […], stream: {source: clicks, …}}"},
		check:       checkJoinRenamed,
	},
	{
		ID: "join-kind", Area: AreaJoins, Title: "A join changes between static and stream under the same id",
		Severities:  []Severity{Rejected},
		Description: "A static join records a snapshot, a stream join buffers both sides' rows; the checkpoint's record of one means nothing to the other.",
		Example:     Example{Old: "join: {name: clicks, static: {delta: {path: s3://lake/clicks}, …}, …}", New: "join: {name: clicks, stream: {source: clicks, …}, …}"},
		check:       joinKindChange.check,
	},
	{
		ID: "join-type", Area: AreaJoins, Title: "A join's type changes",
		Severities:  []Severity{Rejected, Warning},
		Description: "inner, leftOuter, rightOuter, fullOuter and leftSemi emit different rows. A stream join's buffered rows (whose outer rows are still due; a left semi join keeps no left row it has matched) follow the old type: rejected, as Spark lists a changed stream–stream join as not allowed. A static join keeps no state, so it is judged as a filter: a warning that the new type applies from the next batch on (a replayed batch joins the new way against the snapshot it recorded), while the rows already written, and the state built from them, follow the old type. Spark does the same (the planner's oracle, docs/compatibility-spark.md).",
		Example:     Example{Old: "join: {type: inner, …}", New: "join: {type: leftOuter, …}"},
		check:       checkJoinType,
	},
	{
		ID: "join-keys", Area: AreaJoins, Title: "A join's keys or their order change",
		Severities:  []Severity{Rejected, Warning},
		Description: "The equality keys (left and right column with their types, in order) decide which rows match. For a stream join they are its state key too, so buffered rows would never be found again: rejected, a new order as well, as for the keys of other stateful steps (Databricks' full-refresh list names join keys). A static join keeps no state, so it is judged as a filter: a warning that rows match by the new keys from the next batch on, while the rows already written, and the state built from them, matched by the old ones. Spark does the same.",
		Example:     Example{Old: "keys: [{left: customer_id, right: id}]", New: "keys: [{left: customer_id, right: id}, {left: country, right: country}]"},
		check:       checkJoinKeys,
	},
	{
		ID: "join-side", Area: AreaJoins, Title: "A join's right side changes",
		Severities:  []Severity{Rejected, Warning},
		Description: "A stream join's source is its identity: the buffered rows came from it, so another source is rejected (join it with a new join under a fresh checkpoint instead). A static join keeps no state, so another table (kind, path and, for files, format) is judged as a filter: a warning that the join reads the new table from the next batch on, while the rows already written, and the state built from them, were joined with the old one. Spark does the same (it rereads a static side at every start). The snapshot each batch recorded names its table, so the next batch reads a new snapshot of the new table instead of the old one's version or files; a batch planned before the change and replayed after it joins the new table's newest snapshot, since the recorded one is of the old table.",
		Example:     Example{Old: "static: {delta: {path: s3://lake/customers}, …}", New: "static: {delta: {path: s3://lake/customers_v2}, …}"},
		check:       joinSide.check,
	},
	{
		ID: "join-side-transform", Area: AreaJoins, Title: "A stream join's right-side transform changes",
		Severities:  []Severity{Warning, Rejected},
		Description: "The right rows already buffered passed the old `join.stream.transform` and keep its values: until the watermark evicts them (within the time bound), matches with them follow the old transform, new right rows the new one (a warning). When the right side's columns change (names or types), the buffered rows no longer fit the join and the engine refuses its state (rejected). Changes upstream of the transform, in the source's schema, are judged by the source rules.",
		Example:     Example{Old: "stream: {source: clicks, transform: [{filter: \"cost > 0.0\"}], …}", New: "stream: {source: clicks, transform: [{filter: \"cost > 1.0\"}], …}"},
		check:       checkJoinSideTransform,
	},
	{
		ID: "join-time-bound", Area: AreaJoins, Title: "A stream join's time bound changes",
		Severities:  []Severity{Rejected},
		Description: "The time bound (its columns and both durations, compared by value) decides how long each side's rows are buffered and when outer rows are emitted; rows buffered under the old bound would be matched and evicted by neither.",
		Example:     Example{Old: "timeBound: {leftColumn: imp_time, rightColumn: click_time, lowerBound: 0s, upperBound: 1h}", New: "timeBound: {…, upperBound: 2h}"},
		check:       joinTimeBound.check,
	},
	{
		ID: "join-watermark", Area: AreaJoins, Title: "A stream join's right watermark changes",
		Severities:  []Severity{Rejected, Warning},
		Description: "The right side's watermark column keys and evicts the right rows buffered: changing it is rejected (the left side's is the query's watermark, judged by watermark-column). A new delay, like the query's watermark delay, only decides future lateness: a warning.",
		Example:     Example{Old: "stream: {watermark: {column: click_time, delay: 20m}, …}", New: "stream: {watermark: {column: click_time, delay: 5m}, …}"},
		check:       checkJoinWatermark,
	},
	{
		ID: "join-refresh", Area: AreaJoins, Title: "A static join's refresh policy changes",
		Severities:  []Severity{Allowed},
		Description: "refresh (every D, onNewVersion, or omitted: keep the first snapshot) only decides when a newer snapshot is read, from the next newly planned batch on; a replayed batch joins against the snapshot its offsets entry records.",
		Example:     Example{Old: "static: {…, refresh: {every: 10m}}", New: "static: {…, refresh: {onNewVersion: true}}"},
		check:       joinRefresh.check,
	},

	// Settings.
	{
		ID: "spark-source-positions", Area: AreaSources, Title: "The number of sources changes on a Spark checkpoint that names none",
		Severities: []Severity{Rejected},
		Description: "A checkpoint written by Spark without source names (offsets log v1: sources not named with DataStreamReader.name) matches the query's sources to its offsets by position. " +
			"Spark refuses a restart with another number of sources (\"There are N sources in the checkpoint offsets and now there are M sources requested by the query\"), and a reordering of sources of the same kind would silently read each from another's offsets. " +
			"Only `lockstep plan` against a Spark checkpoint runs this rule; Lockstep's own checkpoints and the spark runtime's name every source.",
		Example: Example{Old: "(a Spark checkpoint with 1 unnamed source)", New: "sources: [{name: orders, …}, {name: returns, …}]"},
		check:   checkSparkSourcePositions,
	},
	{
		ID: "spark-unrecorded", Area: AreaQuery, Title: "What a Spark checkpoint does not record",
		Severities: []Severity{Warning},
		Description: "A checkpoint that a Spark job wrote, and Lockstep never ran, records its sources, its stateful operators with their state's key and buffer types, the watermark's value and the pinned settings, but no expressions: not an aggregate's input (sum(amount) and sum(amount * 100) have the same buffer), not how a key is computed, not a window's size or slide, a session's gap, nor a stream join's keys and time bound. " +
			"A change to those cannot be judged, and Spark would restart with it silently, so each is a warning naming what the spec now says, never \"no changes\". " +
			"Only a plan against a Spark checkpoint runs this rule: the first run under Lockstep records the query's full shape in the checkpoint, and later changes are judged in full by the other rules.",
		Example: Example{Old: "(a Spark checkpoint of agg(sum(\"amount\")))", New: "aggregates: [{name: revenue, function: sum, column: amount}]"},
		check:   checkSparkUnrecorded,
	},
	{
		ID: "state-partitions", Area: AreaSettings, Title: "The number of state partitions changes",
		Severities:  []Severity{Rejected},
		Description: "spec.stateStore.partitions is pinned by the checkpoint at its first batch: state keys are hashed into that many partitions, so another count would look for every key in the wrong partition. Spark silently keeps the old value and ignores the new one (a known pain); Lockstep rejects the change instead, stateless queries included, so that the spec always says what runs.",
		Example:     Example{Old: "stateStore: {partitions: 8}", New: "stateStore: {partitions: 16}"},
		check:       statePartitions.check,
	},
	{
		ID: "runtime", Area: AreaSettings, Title: "The runtime changes (built-in engine ↔ Spark)",
		Severities:  []Severity{Rejected},
		Description: "spec.runtime (or `lockstep run --runtime`) chooses the built-in engine or Apache Spark. The two keep different checkpoint formats at the same location — Spark its own metadata, offsets, commits, sources and state, the built-in engine Lockstep's — so neither can resume the other's offsets or state. The runtime is pinned at the first batch like the state partitions; a change is rejected rather than left to fail, or to start over silently, at start. See docs/spark.md.",
		Example:     Example{Old: "runtime: {}", New: "runtime: {spark: {}}"},
		check:       runtimeChange.check,
	},
	{
		ID: "trigger", Area: AreaSettings, Title: "The trigger changes",
		Severities:  []Severity{Allowed},
		Description: "A trigger only decides when batches are planned: it applies from the next newly planned batch, and a batch planned before the restart is first re-run with its logged offsets. Allowed, as in Spark and Databricks.",
		Example:     Example{Old: "trigger: {processingTime: 1m}", New: "trigger: {availableNow: true}"},
		check:       triggerChange.check,
	},
}
