package v1

import "strconv"

// Step is one transform step. Exactly one field is set.
// +kubebuilder:validation:XValidation:rule="[has(self.filter), has(self.select), has(self.watermark), has(self.aggregate), has(self.dropDuplicates), has(self.join)].filter(x, x).size() == 1",message="exactly one of filter, select, watermark, aggregate, dropDuplicates, join must be set"
type Step struct {
	// Filter keeps the rows for which this CEL expression is true. It sees the columns
	// flowing into the step as variables.
	// +optional
	Filter string `json:"filter,omitempty"`
	// Select replaces the columns with the listed ones, each computed by a CEL expression.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	Select []Projection `json:"select,omitempty"`
	// Watermark tracks event time on a timestamp column: watermark = newest event time seen
	// minus Delay. Stateful steps after it drop rows older than the watermark and evict state
	// that the watermark has passed.
	// +optional
	Watermark *Watermark `json:"watermark,omitempty"`
	// Aggregate groups rows and computes aggregates per group. Stateful.
	// +optional
	Aggregate *Aggregate `json:"aggregate,omitempty"`
	// DropDuplicates keeps the first row of each distinct combination of columns. Stateful.
	// +optional
	DropDuplicates *DropDuplicates `json:"dropDuplicates,omitempty"`
	// Join joins the rows with a static table (stream–static) or with a second named source
	// (stream–stream, stateful). See docs/spec.md.
	// +optional
	Join *Join `json:"join,omitempty"`
}

// StepKind names the kind of a transform step, as its field is named in the spec.
type StepKind string

// Step kinds.
const (
	StepFilter         StepKind = "filter"
	StepSelect         StepKind = "select"
	StepWatermark      StepKind = "watermark"
	StepAggregate      StepKind = "aggregate"
	StepDropDuplicates StepKind = "dropDuplicates"
	StepJoin           StepKind = "join"
)

// Kinds returns the kinds that are set on s, in spec order; a valid step has exactly one.
// A select is set when the list is present, even if empty.
func (s *Step) Kinds() []StepKind {
	var kinds []StepKind
	if s.Filter != "" {
		kinds = append(kinds, StepFilter)
	}
	if s.Select != nil {
		kinds = append(kinds, StepSelect)
	}
	if s.Watermark != nil {
		kinds = append(kinds, StepWatermark)
	}
	if s.Aggregate != nil {
		kinds = append(kinds, StepAggregate)
	}
	if s.DropDuplicates != nil {
		kinds = append(kinds, StepDropDuplicates)
	}
	if s.Join != nil {
		kinds = append(kinds, StepJoin)
	}
	return kinds
}

// Kind returns the step's kind, or "" unless exactly one kind is set.
func (s *Step) Kind() StepKind {
	if k := s.Kinds(); len(k) == 1 {
		return k[0]
	}
	return ""
}

// Stateful reports whether the step is an aggregate or a dropDuplicates: a step whose state
// is named by StatefulName. A join keeps state too (a stream join its buffered rows, a static
// join its snapshot's version) but is named apart, by JoinName, so that adding or removing a
// join never moves the ordinals of the other stateful steps.
func (s *Step) Stateful() bool {
	k := s.Kind()
	return k == StepAggregate || k == StepDropDuplicates
}

// StatefulName returns the name of a stateful step: its own Name, if set, else its ordinal
// among the stateful steps of the query (ordinal counts from 0). The checkpoint keys the
// step's state by this name.
func (s *Step) StatefulName(ordinal int) string {
	var name string
	switch {
	case s.Aggregate != nil:
		name = s.Aggregate.Name
	case s.DropDuplicates != nil:
		name = s.DropDuplicates.Name
	}
	if name != "" {
		return name
	}
	return strconv.Itoa(ordinal)
}

// JoinName returns the name of a join step: its own Name, if set, else "join-" and its
// ordinal among the query's joins (counting from 0). The checkpoint keys a stream join's state
// and a static join's snapshot version by this name.
func (s *Step) JoinName(ordinal int) string {
	if s.Join != nil && s.Join.Name != "" {
		return s.Join.Name
	}
	return "join-" + strconv.Itoa(ordinal)
}

// JoinNames returns the name of every join step of the spec, in order, with the index of its
// step in spec.transform.
func (s *StreamingQuerySpec) JoinNames() (names []string, steps []int) {
	for i := range s.Transform {
		if s.Transform[i].Join != nil {
			names = append(names, s.Transform[i].JoinName(len(names)))
			steps = append(steps, i)
		}
	}
	return names, steps
}

// JoinedSources returns the names of the sources that a stream join reads as its right side:
// they are not unioned with the other sources.
func (s *StreamingQuerySpec) JoinedSources() map[string]bool {
	out := map[string]bool{}
	for i := range s.Transform {
		if j := s.Transform[i].Join; j != nil && j.Stream != nil && j.Stream.Source != "" {
			out[j.Stream.Source] = true
		}
	}
	return out
}

// Projection is one output column of a select: its name and the CEL expression computing it.
type Projection struct {
	// Name of the output column: letters, digits and underscores, not starting with a digit.
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	Name string `json:"name"`
	// Expr is the CEL expression computing the column; it sees the columns flowing into the
	// step as variables.
	// +kubebuilder:validation:MinLength=1
	Expr string `json:"expr"`
}

// Watermark declares event time on a column.
type Watermark struct {
	// Column is a timestamp column.
	Column string `json:"column"`
	// Delay is how late rows may arrive (a Go duration such as 10m); 0s means not at all.
	Delay Duration `json:"delay"`
}

// Aggregate groups rows by keys and computes aggregates per group. Its output columns are
// the group keys, in order (a window yields window_start and window_end), then the aggregates.
type Aggregate struct {
	// Name identifies the step's state in the checkpoint: lower-case letters, digits, '-' and
	// '_', starting and ending with a letter or digit (per_country), unique among the stateful
	// steps. Omitted: the step's ordinal among the stateful steps.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`
	// GroupBy lists the grouping keys. Their order is part of the state key. Omitted: one
	// global group.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	GroupBy []GroupKey `json:"groupBy,omitempty"`
	// Aggregates are the values computed per group.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	Aggregates []Aggregation `json:"aggregates"`
}

// GroupKey is one grouping key: a column, an event-time window or a session window on a
// timestamp column.
// +kubebuilder:validation:XValidation:rule="[has(self.column), has(self.window), has(self.session)].filter(x, x).size() == 1",message="exactly one of column, window, session must be set"
type GroupKey struct {
	// Column groups by the value of this column.
	// +optional
	Column string `json:"column,omitempty"`
	// +optional
	Window *Window `json:"window,omitempty"`
	// +optional
	Session *SessionWindow `json:"session,omitempty"`
}

// Window assigns each row to event-time windows [start, start+duration) aligned to the Unix
// epoch: tumbling windows without Slide, sliding windows (a row in several) with it.
type Window struct {
	// Column is a timestamp column.
	Column string `json:"column"`
	// Duration is the window length (a Go duration such as 5m).
	Duration Duration `json:"duration"`
	// Slide is the distance between window starts; at most Duration. Omitted: Duration (tumbling).
	// +optional
	Slide Duration `json:"slide,omitempty"`
}

// SessionWindow groups the rows of each key into sessions of activity (Spark's
// session_window): a row at event time t opens the session [t, t+Gap); sessions of one key
// that overlap or touch merge into one, across batches. It yields window_start (the first
// row's time) and window_end (the last row's time + Gap). A session closes, and in append
// mode is written, when the watermark reaches its end; Column must therefore be the
// watermark's column. The gap is fixed (Gap) or computed per row (GapExpr, as Spark's
// session_window(col, expr) allows).
// +kubebuilder:validation:XValidation:rule="has(self.gap) != has(self.gapExpr)",message="exactly one of gap, gapExpr must be set"
type SessionWindow struct {
	// Column is a timestamp column: the watermark's.
	Column string `json:"column"`
	// Gap is how long a session stays open after its newest row (a Go duration such as 5m).
	// +optional
	Gap Duration `json:"gap,omitempty"`
	// GapExpr computes the gap of each row: a CEL expression over the columns flowing into
	// the aggregate that yields a duration, such as
	// "country == 'DE' ? duration('5m') : duration('10m')". A row whose gap is null, zero or
	// negative joins no session and is dropped (as in Spark).
	// +optional
	GapExpr string `json:"gapExpr,omitempty"`
}

// Session returns the aggregate's session window, nil if it groups by none.
func (a *Aggregate) Session() *SessionWindow {
	for i := range a.GroupBy {
		if sw := a.GroupBy[i].Session; sw != nil {
			return sw
		}
	}
	return nil
}

// Aggregation computes one output column per group.
type Aggregation struct {
	// Name of the output column.
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	Name string `json:"name"`
	// Function is count, sum, min, max, avg or count_distinct.
	Function AggregateFunction `json:"function"`
	// Column is the input. Required, except for count, which without it counts rows.
	// +optional
	Column string `json:"column,omitempty"`
}

// AggregateFunction is the function of an Aggregation.
// +kubebuilder:validation:Enum=count;sum;min;max;avg;count_distinct
type AggregateFunction string

// Aggregate functions. count and count_distinct yield long; sum yields its input's type; avg
// yields double; min and max yield their input's type.
const (
	AggCount         AggregateFunction = "count"
	AggSum           AggregateFunction = "sum"
	AggMin           AggregateFunction = "min"
	AggMax           AggregateFunction = "max"
	AggAvg           AggregateFunction = "avg"
	AggCountDistinct AggregateFunction = "count_distinct"
)

// AggregateFunctions lists every aggregate function.
func AggregateFunctions() []AggregateFunction {
	return []AggregateFunction{AggCount, AggSum, AggMin, AggMax, AggAvg, AggCountDistinct}
}

// DropDuplicates keeps the first row of each distinct combination of Columns. With a
// watermark on an event-time column among Columns, state older than the watermark is evicted;
// otherwise it grows without bound.
type DropDuplicates struct {
	// Name identifies the step's state in the checkpoint, as Aggregate.Name.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`
	// Columns form the deduplication key, in order (the order is part of the state key).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	Columns []string `json:"columns"`
}
