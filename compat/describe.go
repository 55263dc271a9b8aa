package compat

import (
	"fmt"
	"strconv"
	"strings"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// The describe functions render parts of a shape as the Old and New values of findings and
// inside messages. They are stable: tests and golden files pin them.

func describeSource(s SourceShape) string {
	switch s.Kind {
	case v1.SourceKafka:
		return "kafka " + describeTopics(s)
	case v1.SourceFiles:
		return fmt.Sprintf("files (%s) in %s", s.Format, s.Path)
	case v1.SourceDelta:
		return "delta table " + s.Path
	case v1.SourceRate:
		return "rate"
	case v1.SourceNexmark:
		return "nexmark " + s.Format + " events"
	}
	return string(s.Kind)
}

func describeTopics(s SourceShape) string {
	if s.TopicPattern != "" {
		return "topicPattern " + s.TopicPattern
	}
	return "topics [" + strings.Join(s.Topics, ", ") + "]"
}

// describeOp names a stateful step: aggregate step "revenue", or dropDuplicates step #0 when
// unnamed.
func describeOp(o OperatorShape) string {
	return string(o.Kind) + " step " + describeID(o.ID)
}

func describeID(id string) string {
	if isOrdinal(id) {
		return "#" + id
	}
	return strconv.Quote(id)
}

// describeOpContent is what a stateful step's state is made of, without its id.
func describeOpContent(o OperatorShape) string {
	s := string(o.Kind) + " by " + describeKeys(o.Keys)
	if len(o.Aggregates) > 0 {
		s += " computing " + describeAggs(o.Aggregates)
	}
	if o.Eviction != "" {
		s += " evicting by " + o.Eviction
	}
	return s
}

func describeKeys(keys []KeyShape) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = describeKey(k)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// keyNames lists the keys' columns, a window as "window", a session as "session".
func keyNames(keys []KeyShape) []string {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.Column
		switch {
		case k.Window != nil:
			names[i] = "window"
		case k.Session != nil:
			names[i] = "session"
		}
	}
	return names
}

func describeKey(k KeyShape) string {
	if w := k.Window; w != nil {
		return describeWindow(*w)
	}
	if s := k.Session; s != nil {
		return fmt.Sprintf("session(%s, gap %s)", s.Column, describeGap(*s))
	}
	return k.Column + " " + string(k.Type)
}

func describeWindow(w WindowShape) string {
	if w.Slide != "" {
		return fmt.Sprintf("window(%s, %s, slide %s)", w.Column, w.Duration, w.Slide)
	}
	return fmt.Sprintf("window(%s, %s)", w.Column, w.Duration)
}

func describeAggs(aggs []AggregateShape) string {
	parts := make([]string, len(aggs))
	for i, a := range aggs {
		parts[i] = describeAgg(a)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// describeAgg renders an aggregate as revenue = sum(amount double).
func describeAgg(a AggregateShape) string {
	return a.Name + " = " + describeFunc(a)
}

func describeFunc(a AggregateShape) string {
	if a.Column == "" {
		return string(a.Function) + "(*)"
	}
	return fmt.Sprintf("%s(%s %s)", a.Function, a.Column, a.Type)
}

func describeInput(a AggregateShape) string {
	if a.Column == "" {
		return "all rows"
	}
	return a.Column
}

func describeColumns(cols v1.Columns) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = c.Name + " " + string(c.Type)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func describeTrigger(t v1.Trigger) string {
	switch {
	case t.ProcessingTime != "":
		return "processingTime " + string(t.ProcessingTime)
	case t.AvailableNow:
		return "availableNow"
	case t.Once:
		return "once"
	}
	return "default (each batch as soon as the last ends)"
}

func describeSink(s SinkShape) string {
	switch s.Kind {
	case v1.SinkDelta:
		return "delta table " + s.Path
	case v1.SinkFiles:
		return fmt.Sprintf("files (%s) in %s", s.Format, s.Path)
	case v1.SinkKafka:
		if s.ExactlyOnce {
			return "kafka topic " + s.Topic + " (exactlyOnce)"
		}
		return "kafka topic " + s.Topic
	case v1.SinkWebhook:
		return "webhook " + s.URL
	case v1.SinkPostgres:
		if s.Server != "" {
			return fmt.Sprintf("postgres table %s on %s (connection %s)", s.Table, s.Server, s.Connection)
		}
		return fmt.Sprintf("postgres table %s (connection %s)", s.Table, s.Connection)
	case v1.SinkConsole:
		return "console"
	}
	return string(s.Kind)
}

func describeLimit[T int32 | int64](p *T) string {
	if p == nil {
		return "no limit"
	}
	return strconv.FormatInt(int64(*p), 10)
}

func describeVersion(p *int64) string {
	if p == nil {
		return "the current content"
	}
	return strconv.FormatInt(*p, 10)
}

func describeList(items []string) string { return "(" + strings.Join(items, ", ") + ")" }

// sameDuration compares durations by value: 5m and 300s are the same.
func sameDuration(a, b v1.Duration) bool {
	x, errX := a.Parse()
	y, errY := b.Parse()
	if errX != nil || errY != nil {
		return a == b
	}
	return x == y
}

// describeGap renders a session's gap: its duration, or its expression.
func describeGap(s SessionShape) string {
	if s.GapExpr != "" {
		return s.GapExpr
	}
	return string(s.Gap)
}
