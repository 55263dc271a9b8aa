package compat

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/sparkckpt"
)

// Inference says how a shape was read from a checkpoint that Spark wrote, which records less
// than Lockstep's shape: each fact it inferred (and from which file), and each fact it could
// not infer and took from the new spec, so that the verdict judges only what the checkpoint
// tells.
type Inference struct {
	// Inferred lists the facts read from Spark's files.
	Inferred []string `json:"inferred"`
	// Assumed lists what Spark's files do not record: the verdict assumes it unchanged.
	Assumed []string `json:"assumed"`
	// Positional is true when the checkpoint names no sources (offsets v1): Spark then
	// matches sources by position, and so does the verdict.
	Positional bool `json:"positional,omitempty"`
	// windowsRead holds the ids of the operators whose windows were read from their state
	// rows: the spark-unrecorded rule does not name their sizes.
	windowsRead map[string]bool
	// Unnamed is true when the checkpoint's query did not name its sources: it pins
	// spark.sql.streaming.queryEvolution.enableSourceEvolution other than true, and Spark
	// keeps each source's log under sources/<position>, not sources/<name>. The spark runtime
	// then leaves its sources unnamed too, for as long as the checkpoint lives.
	Unnamed bool `json:"unnamed,omitempty"`
}

// ShapeOfSpark infers the shape of the Spark checkpoint c, for judging spec against it with
// Check. Facts Spark records (its sources, by name or position, their kinds and Kafka topics;
// the files source's folder; the stateful operators in order, their kinds, state key columns
// with their types and aggregate functions; window sizes and slides, from the state rows; the
// shuffle partitions it pins) are taken from c. Facts it does not record (column names a state
// schema lacks, expressions, the sink, the output mode, the trigger) are taken from spec, so
// they judge as unchanged: the Inference says which, and the spark-unrecorded rule names, as
// warnings, those the state depends on.
func ShapeOfSpark(c *sparkckpt.Checkpoint, spec *v1.StreamingQuerySpec, opts ...Option) (Shape, Inference, error) {
	sh, err := ShapeOf(spec, opts...)
	if err != nil {
		return Shape{}, Inference{}, err
	}
	var inf Inference
	inf.Assumed = append(inf.Assumed,
		"the sink, the output mode, the output columns and the trigger (Spark's checkpoint does not record them)",
		"filter and select expressions, and the columns each step computes (Spark does not record them)")
	if c.Latest != nil {
		sh.Sources = sparkSources(c, sh.Sources, &inf)
		inf.Unnamed = len(c.Sources) > 0 && !c.Latest.NamesSources()
		if p, ok := c.Latest.Conf["spark.sql.shuffle.partitions"]; ok {
			if n, err := strconv.ParseInt(p, 10, 32); err == nil {
				sh.Pinned.StatePartitions = int32(n)
				inf.Inferred = append(inf.Inferred, fmt.Sprintf("state partitions %d: spark.sql.shuffle.partitions pinned in offsets/%d", n, c.Latest.BatchID))
			}
		}
	}
	sh.Operators = sparkOperators(c, sh.Operators, &inf)
	if c.LatestCommit != nil && c.LatestCommit.NextBatchWatermarkMs > 0 && sh.Watermark == nil {
		// Spark's watermark moved, so the query had one: removing it is judged.
		sh.Watermark = &WatermarkShape{Column: "(a column Spark does not record)"}
		inf.Inferred = append(inf.Inferred, fmt.Sprintf("a watermark: commits/%d records nextBatchWatermarkMs %d", c.LatestCommit.BatchID, c.LatestCommit.NextBatchWatermarkMs))
	} else if sh.Watermark != nil {
		inf.Assumed = append(inf.Assumed, "the watermark's column and delay")
	}
	return sh, inf, nil
}

// sparkSources infers the sources of the newest batch. Named sources (offsets v2) keep their
// names; unnamed ones (v1) take the spec's names by position.
func sparkSources(c *sparkckpt.Checkpoint, spec []SourceShape, inf *Inference) []SourceShape {
	inf.Positional = c.Latest.Version == 1
	var out []SourceShape
	for i, s := range c.Sources {
		var sh SourceShape
		switch {
		case inf.Positional && i < len(spec):
			sh = spec[i]
		case inf.Positional:
			sh = SourceShape{Name: fmt.Sprintf("(source %d of the checkpoint)", i)}
		default:
			sh = SourceShape{Name: s.ID}
			if k := slices.IndexFunc(spec, func(n SourceShape) bool { return n.Name == s.ID }); k >= 0 {
				sh = spec[k]
			}
		}
		where := fmt.Sprintf("source %s of offsets/%d", s.ID, c.Latest.BatchID)
		switch kind := v1.SourceKind(s.Kind); kind {
		case v1.SourceKafka:
			var topics map[string]json.RawMessage
			if json.Unmarshal(s.Offset, &topics) == nil && len(topics) > 0 {
				sh.Kind, sh.TopicPattern = kind, ""
				sh.Topics = nil
				for t := range topics {
					sh.Topics = append(sh.Topics, t)
				}
				slices.Sort(sh.Topics)
				inf.Inferred = append(inf.Inferred, fmt.Sprintf("%s: kafka, topics %s", where, strings.Join(sh.Topics, ", ")))
			}
		case v1.SourceFiles:
			sh.Kind = kind
			if dir := sparkFilesDir(s); dir != "" {
				sh.Path = checkpoint.CanonicalLocation(dir)
				inf.Inferred = append(inf.Inferred, fmt.Sprintf("%s: files in %s (the folder of the files its log lists)", where, dir))
			} else {
				inf.Inferred = append(inf.Inferred, where+": files")
			}
		case v1.SourceDelta:
			sh.Kind = kind
			inf.Inferred = append(inf.Inferred, where+": delta (the table's path is not recorded)")
		default:
			inf.Assumed = append(inf.Assumed, where+": its kind (its offset does not tell)")
		}
		out = append(out, sh)
	}
	if len(c.Sources) > 0 {
		inf.Assumed = append(inf.Assumed, "the sources' formats, schemas, starting positions and rate limits")
	}
	return out
}

// sparkFilesDir is the folder of the files a file source's log lists, when they share one.
func sparkFilesDir(s sparkckpt.Source) string {
	if len(s.Folders) != 1 {
		return ""
	}
	return sparkckpt.LockstepLocation(s.Folders[0])
}

// sparkOperatorKinds maps Spark's operator names to the step kinds that write them.
var sparkOperatorKinds = map[string]v1.StepKind{
	"stateStoreSave":          v1.StepAggregate,
	"dedupe":                  v1.StepDropDuplicates,
	"dedupeWithinWatermark":   v1.StepDropDuplicates,
	"symmetricHashJoin":       v1.StepJoin,
	"sessionWindowStateStore": v1.StepAggregate,
}

// sparkOperators infers the stateful operators, in the plan's order. Spark identifies them by
// position from the sink (operator 0 is the one nearest the sink), so they are lined up with
// the spec's operators from the last one back, and take the spec's operator ids: a step the
// spec adds before the checkpoint's operators is then a step added, and one it removes a
// step removed. Their kinds, key columns and aggregate functions come from Spark's files.
func sparkOperators(c *sparkckpt.Checkpoint, spec []OperatorShape, inf *Inference) []OperatorShape {
	// Joins are not operators in the shape: Spark's join state is judged by the join rules,
	// which take the spec's joins (assumed).
	// Spark numbers the stateful operators from the sink back to the sources (the aggregate
	// after a dedup is operator 0, the dedup 1): the plan's order is the ids' reverse.
	var ops []sparkckpt.Operator
	for _, op := range slices.Backward(c.Operators) {
		if sparkOperatorKinds[op.Name] == v1.StepJoin {
			inf.Assumed = append(inf.Assumed, fmt.Sprintf("the stream join of state/%d: its keys and time bound", op.ID))
			continue
		}
		ops = append(ops, op)
	}
	var out []OperatorShape
	for i, op := range ops {
		var sh OperatorShape
		if k := len(spec) - len(ops) + i; k >= 0 {
			sh = spec[k]
		} else {
			sh = OperatorShape{ID: fmt.Sprintf("(operator %d of the Spark checkpoint)", op.ID)}
		}
		where := fmt.Sprintf("state/%d", op.ID)
		kind, known := sparkOperatorKinds[op.Name]
		if !known {
			inf.Assumed = append(inf.Assumed, fmt.Sprintf("%s: operator %q is not one Lockstep writes", where, cmp.Or(op.Name, "without metadata")))
			out = append(out, sh)
			continue
		}
		sh.Kind = kind
		inf.Inferred = append(inf.Inferred, fmt.Sprintf("%s: %s (%s)", where, kind, op.Name))
		if s, ok := op.Schemas["default"]; ok && len(s.Families) > 0 {
			sh.Keys = sparkKeys(s.Families[0].Key, sh.Keys)
			if w, ok := sparkWindow(op.Windows); ok {
				for k := range sh.Keys {
					if old := sh.Keys[k].Window; old != nil {
						w.Column = old.Column
						sh.Keys[k].Window = &w
					}
				}
				if inf.windowsRead == nil {
					inf.windowsRead = map[string]bool{}
				}
				inf.windowsRead[sh.ID] = true
				inf.Inferred = append(inf.Inferred, fmt.Sprintf("%s: windows of %s%s (end − start and the starts of %d windows in its state rows)",
					where, w.Duration, map[bool]string{true: ", slide " + string(w.Slide), false: ""}[w.Slide != ""], len(op.Windows)))
			}
			inf.Inferred = append(inf.Inferred, fmt.Sprintf("%s: state key %s", where, describeKeys(sh.Keys)))
			if kind == v1.StepAggregate {
				if fns := sparkAggregateFunctions(s.Families[0].Value, sh.Aggregates); fns != nil {
					sh.Aggregates = sparkAggregates(fns, sh.Aggregates)
					inf.Inferred = append(inf.Inferred, fmt.Sprintf("%s: aggregate functions %s (from the state's buffer columns)", where, joinFunctions(fns)))
				}
				inf.Assumed = append(inf.Assumed, where+": aggregate names and input columns")
				if !inf.windowsRead[sh.ID] && slices.ContainsFunc(sh.Keys, func(k KeyShape) bool { return k.Window != nil }) {
					inf.Assumed = append(inf.Assumed, where+": window sizes (no state row read)")
				}
			}
		} else {
			inf.Assumed = append(inf.Assumed, where+": its state key (no state schema file found)")
		}
		out = append(out, sh)
	}
	return out
}

// sparkKeys reads the state key's columns: a column is a key by its name and type, a window
// (window: struct<start, end>) keeps the spec's window at its position (Spark does not record
// its column or size).
func sparkKeys(key sparkckpt.StructType, spec []KeyShape) []KeyShape {
	keys := []KeyShape{}
	for i, f := range key.Fields {
		var k KeyShape
		if i < len(spec) {
			k = spec[i]
		}
		if f.Name == "window" && strings.HasPrefix(f.TypeName(), "struct<start:timestamp,end:timestamp") {
			if k.Window == nil {
				k = KeyShape{Window: &WindowShape{Column: "(a column Spark does not record)"}}
			}
			keys = append(keys, k)
			continue
		}
		from := k.From
		if k.Column != f.Name {
			from = f.Name
		}
		keys = append(keys, KeyShape{Column: f.Name, Type: sparkColumnType(f.TypeName()), From: from})
	}
	return keys
}

// sparkWindow reads a window's size and slide from windows of the state rows: end − start is
// the size (all the same, else nothing is inferred), and the starts are multiples of the
// slide, so their greatest common divisor with the size is the slide (the size: tumbling).
func sparkWindow(ws []sparkckpt.Window) (WindowShape, bool) {
	if len(ws) == 0 {
		return WindowShape{}, false
	}
	size := ws[0].End.Sub(ws[0].Start)
	step := size.Microseconds()
	for _, w := range ws {
		if w.End.Sub(w.Start) != size {
			return WindowShape{}, false
		}
		step = gcd(step, w.Start.UnixMicro())
	}
	if step <= 0 {
		return WindowShape{}, false
	}
	sh := WindowShape{Duration: shortDuration(size)}
	if slide := time.Duration(step) * time.Microsecond; slide != size {
		sh.Slide = shortDuration(slide)
	}
	return sh, true
}

func gcd(a, b int64) int64 {
	if a < 0 {
		a = -a
	}
	if b < 0 {
		b = -b
	}
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// shortDuration writes d as a spec would: 2m, 90s, 1h.
func shortDuration(d time.Duration) v1.Duration {
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if d%u.unit == 0 {
			return v1.Duration(strconv.FormatInt(int64(d/u.unit), 10) + u.name)
		}
	}
	return v1.Duration(d.String())
}

// sparkColumnType maps a Spark SQL type to a column type; "" for one Lockstep has not.
func sparkColumnType(t string) v1.ColumnType {
	switch t {
	case "string":
		return v1.TypeString
	case "long", "integer", "short", "byte":
		return v1.TypeLong
	case "double", "float":
		return v1.TypeDouble
	case "boolean":
		return v1.TypeBoolean
	case "timestamp", "timestamp_ntz":
		return v1.TypeTimestamp
	}
	return ""
}

// sparkAggregateFunctions reads the aggregate functions from a streaming aggregation's value
// schema: its aggregation buffer, one column per function (sum, count, max, min) and two for
// avg (sum, count). A buffer may fit several lists of functions ((sum, count) is avg's, and
// sum's and count's): when the spec's aggregates have exactly this buffer, they are the
// functions, so an unchanged job is never refused; otherwise the buffer is read column by
// column, an avg wherever a sum is followed by a count. nil when a column is not a buffer
// Lockstep knows.
func sparkAggregateFunctions(value sparkckpt.StructType, spec []AggregateShape) []v1.AggregateFunction {
	names := value.Names()
	if fns, buffer := aggregateBuffer(spec); slices.Equal(buffer, names) {
		return fns
	}
	var fns []v1.AggregateFunction
	for i := 0; i < len(names); i++ {
		// Where the spec has an aggregate, a sum and a count are an avg only if it is one;
		// past the spec's aggregates, wherever they can be.
		avgHere := len(fns) >= len(spec) || spec[len(fns)].Function == v1.AggAvg
		switch names[i] {
		case "sum":
			if avgHere && i+1 < len(names) && names[i+1] == "count" {
				fns = append(fns, v1.AggAvg)
				i++
				continue
			}
			fns = append(fns, v1.AggSum)
		case "count":
			fns = append(fns, v1.AggCount)
		case "max":
			fns = append(fns, v1.AggMax)
		case "min":
			fns = append(fns, v1.AggMin)
		default:
			return nil
		}
	}
	return fns
}

// aggregateBuffer is the functions of aggs and the columns of the aggregation buffer Spark
// keeps for them; no buffer when one has no buffer Lockstep knows.
func aggregateBuffer(aggs []AggregateShape) ([]v1.AggregateFunction, []string) {
	var fns []v1.AggregateFunction
	var buffer []string
	for _, a := range aggs {
		switch a.Function {
		case v1.AggAvg:
			buffer = append(buffer, "sum", "count")
		case v1.AggSum, v1.AggCount, v1.AggMax, v1.AggMin:
			buffer = append(buffer, string(a.Function))
		default:
			return nil, nil
		}
		fns = append(fns, a.Function)
	}
	return fns, buffer
}

// sparkAggregates sets the functions of the spec's aggregates by position; an aggregate the
// checkpoint has and the spec has not keeps only its function.
func sparkAggregates(fns []v1.AggregateFunction, spec []AggregateShape) []AggregateShape {
	out := make([]AggregateShape, len(fns))
	for i, fn := range fns {
		if i < len(spec) {
			out[i] = spec[i]
		} else {
			out[i] = AggregateShape{Name: fmt.Sprintf("(aggregate %d of the checkpoint)", i)}
		}
		if out[i].Function != fn {
			out[i].Function = fn
		}
	}
	return out
}

func joinFunctions(fns []v1.AggregateFunction) string {
	s := make([]string, len(fns))
	for i, f := range fns {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}

// FromSpark tells Check that old was inferred from a Spark checkpoint (ShapeOfSpark), so
// that the rules about Spark's own matching run.
func FromSpark(inf Inference, sources int) Option {
	return func(o *outside) {
		o.fromSpark = true
		o.sparkWindowsRead = inf.windowsRead
		if inf.Positional {
			o.positionalSources = sources
		}
	}
}

// checkSparkUnrecorded names, as warnings, what the state depends on that a Spark checkpoint
// does not record, so that a change to it cannot be judged: each aggregate's input (Spark
// records only the buffer's types), how a key or input column is computed, a window's
// size and slide, a session's gap, and a stream join's keys and time bound. A verdict
// against a Spark checkpoint is never "no changes" for these: it says what it took on trust.
func checkSparkUnrecorded(c *change) []Finding {
	if !c.out.fromSpark {
		return nil
	}
	var out []Finding
	warn := func(path, what, now, effect string) {
		out = append(out, Finding{
			Severity: Warning,
			Path:     path,
			New:      now,
			Message: fmt.Sprintf("Spark's checkpoint does not record %s, so a change to it since the Spark job cannot be judged: if the job's differs from %s, %s.",
				what, now, effect),
			Remedy: "Check that the Spark job had the same; the first run under Lockstep records the query's full shape in the checkpoint, so that later changes are judged in full.",
		})
	}
	for i, op := range c.new.Operators {
		path := c.opPath(i)
		keys := path + ".groupBy"
		if op.Kind == v1.StepDropDuplicates {
			keys = path + ".columns"
		}
		for k, key := range op.Keys {
			switch {
			case key.Window != nil && c.out.sparkWindowsRead[op.ID]:
			case key.Window != nil:
				warn(fmt.Sprintf("%s[%d].window", keys, k), "a window's size and slide", describeWindow(*key.Window),
					"the open windows in the state were cut another way, and the output would mix both sizes")
			case key.Session != nil:
				warn(fmt.Sprintf("%s[%d].session", keys, k), "a session's gap", describeKey(key),
					"the open sessions in the state were merged by another gap")
			case key.From != "" && key.From != key.Column:
				warn(fmt.Sprintf("%s[%d]", keys, k), fmt.Sprintf("how the key column %s is computed", key.Column), key.Column+" = "+key.From,
					"the keys in the state were computed another way, and a group may appear twice")
			}
		}
		for k, a := range op.Aggregates {
			if a.Column == "" {
				continue
			}
			now := describeFunc(a)
			if a.From != "" && a.From != a.Column {
				now += " where " + a.Column + " = " + a.From
			}
			warn(fmt.Sprintf("%s.aggregates[%d]", path, k), fmt.Sprintf("the input of aggregate %s (only its buffer's types)", a.Name), now,
				"Spark would silently go on from each group's state with the new input")
		}
	}
	for i, j := range c.new.Joins {
		if j.Stream == nil {
			continue
		}
		warn(c.joinPath(i), "a stream join's keys and time bound (only the buffered rows' types)", describeJoinKeys(j.Keys)+" where "+describeTimeBound(j),
			"the rows it buffered were matched and evicted another way")
	}
	return out
}

func checkSparkSourcePositions(c *change) []Finding {
	n := c.out.positionalSources
	if n == 0 || n == len(c.spec.Sources) {
		return nil
	}
	return []Finding{{
		Severity: Rejected,
		Path:     "spec.sources",
		Old:      fmt.Sprintf("%d unnamed sources", n),
		New:      fmt.Sprintf("%d sources", len(c.spec.Sources)),
		Message: fmt.Sprintf("The Spark checkpoint names no sources and has %d; Spark matches sources to offsets by position and refuses to restart with %d.",
			n, len(c.spec.Sources)),
		Remedy: c.revertOrFresh(fmt.Sprintf("Keep exactly the checkpoint's %d sources, in their order", n)),
	}}
}
