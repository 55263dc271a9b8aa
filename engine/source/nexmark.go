package source

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
)

var (
	_ engine.Source             = (*Nexmark)(nil)
	_ engine.ChunkReader        = (*Nexmark)(nil)
	_ engine.AvailableNowSource = (*Nexmark)(nil)
)

// NexmarkSpec describes the nexmark source for the registry and the docs.
func NexmarkSpec() engine.ComponentSpec {
	return engine.ComponentSpec{
		Summary: "Generates the Nexmark benchmark's events (people, auctions and bids, 1:3:46) by its reference " +
			"generator's rules and yields those of one table. Offsets are event numbers and every event is a pure " +
			"function of its number and the seed, so a replayed batch yields the same rows.",
		Fields: []engine.FieldSpec{
			{Name: "table", Default: "bid", Description: "bid, auction or person"},
			{Name: "eventsPerSecond", Default: "10000", Description: "events per second of event time, and the pace of generation unless asFastAsPossible"},
			{Name: "asFastAsPossible", Default: "false", Description: "generate maxEventsPerTrigger events a batch without waiting for them to be due"},
			{Name: "maxEventsPerTrigger", Default: "100000", Description: "events (of every kind) per batch at most"},
			{Name: "numEvents", Description: "events after which the stream ends; omitted: unbounded"},
			{Name: "seed", Default: "0", Description: "the stream's seed"},
			{Name: "startTime", Description: "timestamp of event 0 (RFC 3339); omitted: the first batch's time"},
		},
	}
}

// Nexmark generates Nexmark events (see nexmarkGen for the rules). Event n
// is stamped baseMs + (n-baseEvent)·1000/eventsPerSecond milliseconds; the
// end offset of every batch carries that timeline and the seed, so Read
// needs nothing but the offsets.
//
// A Nexmark is used by one goroutine at a time.
type Nexmark struct {
	table       v1.NexmarkTable
	perSecond   int64
	fast        bool
	maxPerBatch int64
	numEvents   int64 // 0: unbounded
	seed        int64
	startMs     int64 // the spec's startTime; valid when hasStart
	hasStart    bool
	// base and first pace a paced run: event first+k is due at
	// base + k/perSecond. base is the time of the run's first plan.
	base  time.Time
	first int64
	// until, when set, bounds generation (availableNow).
	until time.Time
	gen   *nexmarkGen // made on the first Read, for the seed it needs
}

// nexmarkOffset is the nexmark source's offset: events [previous Event,
// Event) belong to the batch, generated with Seed and stamped on the
// timeline (BaseEvent, BaseMs, EventsPerSecond). A change of the spec's
// rate starts a new timeline at the next batch's first event, so that
// timestamps never go back.
type nexmarkOffset struct {
	Event           int64 `json:"event"`
	Seed            int64 `json:"seed"`
	BaseEvent       int64 `json:"baseEvent"`
	BaseMs          int64 `json:"baseMs"`
	EventsPerSecond int64 `json:"eventsPerSecond"`
}

func (o nexmarkOffset) timeline() timeline {
	return timeline{baseEvent: o.BaseEvent, baseMs: o.BaseMs, perSecond: o.EventsPerSecond}
}

// NewNexmark returns the nexmark source of spec.
func NewNexmark(_ context.Context, spec *v1.Source, _ engine.SourceEnv) (engine.Source, error) {
	n := spec.Nexmark
	if n == nil {
		return nil, fmt.Errorf("not a nexmark source")
	}
	s := &Nexmark{
		table:       n.Table,
		perSecond:   n.EventsPerSecond,
		fast:        n.AsFastAsPossible,
		maxPerBatch: n.MaxEventsPerTrigger,
		seed:        n.Seed,
	}
	if s.table == "" {
		s.table = v1.DefaultNexmarkTable
	}
	if s.perSecond <= 0 {
		s.perSecond = v1.DefaultNexmarkEventsPerSecond
	}
	if s.maxPerBatch <= 0 {
		s.maxPerBatch = v1.DefaultNexmarkMaxEventsPerTrigger
	}
	if n.NumEvents != nil {
		s.numEvents = *n.NumEvents
	}
	if n.StartTime != "" {
		t, err := time.Parse(time.RFC3339, n.StartTime)
		if err != nil {
			return nil, fmt.Errorf("nexmark startTime %q: want RFC 3339: %w", n.StartTime, err)
		}
		s.startMs, s.hasStart = t.UnixMilli(), true
	}
	return s, nil
}

// PrepareAvailableNow bounds generation to the events due at now; a source
// generating as fast as possible is bounded by numEvents alone, and without
// it never runs dry.
func (s *Nexmark) PrepareAvailableNow(_ context.Context, now time.Time) error {
	if s.fast && s.numEvents == 0 {
		return fmt.Errorf("nexmark source generates as fast as possible without numEvents, so an availableNow or once run would never end: set numEvents")
	}
	s.until = now
	return nil
}

// Plan returns the events due by req.Time (paced), or the next
// maxEventsPerTrigger events (as fast as possible), within numEvents. A
// range that holds no event of the source's table is not planned.
func (s *Nexmark) Plan(_ context.Context, req engine.PlanRequest) (engine.Planned, error) {
	start, err := parseOffset[nexmarkOffset]("nexmark", req.Start)
	if err != nil {
		return engine.Planned{}, err
	}
	if len(req.Start) == 0 {
		start = nexmarkOffset{Seed: s.seed, EventsPerSecond: s.perSecond, BaseMs: req.Time.UnixMilli()}
		if s.hasStart {
			start.BaseMs = s.startMs
		}
	}
	end := start
	end.Seed = s.seed
	if start.EventsPerSecond != s.perSecond {
		// A new rate: a new timeline from the next event on, where the old one left it.
		end.BaseEvent, end.BaseMs, end.EventsPerSecond = start.Event, start.timeline().ms(start.Event), s.perSecond
	}
	from := start.Event
	var upto int64
	var lag *int64
	if s.fast {
		upto = from + s.maxPerBatch
		if !req.Limit && s.numEvents > 0 {
			upto = s.numEvents
		}
	} else {
		now := req.Time
		if !s.until.IsZero() && s.until.Before(now) {
			now = s.until
		}
		if s.base.IsZero() || from < s.first {
			s.base, s.first = now, from
		}
		// Events first+k with base + k/perSecond <= now.
		due := s.first + dueCount(now.Sub(s.base), s.perSecond)
		if s.numEvents > 0 {
			due = min(due, s.numEvents)
		}
		upto = due
		if req.Limit && upto-from > s.maxPerBatch {
			upto = from + s.maxPerBatch
			behind := due - upto
			lag = &behind
		}
	}
	if s.numEvents > 0 {
		upto = min(upto, s.numEvents)
		if lag == nil {
			left := s.numEvents - max(upto, from)
			lag = &left
		}
	}
	if upto <= from || countKind(s.table, from, upto) == 0 {
		same, _ := json.Marshal(start)
		return engine.Planned{End: same, Backlog: engine.Backlog{Lag: lag}}, nil
	}
	end.Event = upto
	b, _ := json.Marshal(end)
	return engine.Planned{End: b, HasData: true, Backlog: engine.Backlog{Lag: lag}}, nil
}

// Read returns the rows of the table's events in (req.Start, req.End],
// from the offsets alone.
func (s *Nexmark) Read(_ context.Context, req engine.ReadRequest) (engine.ReadResult, error) {
	var rows []engine.Row
	err := s.generate(req, math.MaxInt64, func(r []engine.Row) error { rows = r; return nil })
	return engine.ReadResult{Rows: rows}, err
}

// nexmarkChunkEvents is how many events ReadChunks generates at a time.
const nexmarkChunkEvents = 8192

// ReadChunks generates what Read returns, nexmarkChunkEvents events at a time
// (engine.ChunkReader).
func (s *Nexmark) ReadChunks(_ context.Context, req engine.ReadRequest, emit func([]engine.Row) error) (engine.ReadResult, error) {
	return engine.ReadResult{}, s.generate(req, nexmarkChunkEvents, emit)
}

// generate hands the rows of the table's events in (req.Start, req.End] to
// emit, chunk events at a time.
func (s *Nexmark) generate(req engine.ReadRequest, chunk int64, emit func([]engine.Row) error) error {
	start, end, err := parseRange[nexmarkOffset]("nexmark", req)
	if err != nil {
		return err
	}
	if end.Event <= start.Event {
		return nil
	}
	if end.EventsPerSecond <= 0 {
		return fmt.Errorf("nexmark offset %s: no eventsPerSecond", req.End)
	}
	if s.gen == nil || s.gen.seed != end.Seed {
		s.gen = newNexmarkGen(end.Seed)
	}
	tl := end.timeline()
	for from := start.Event; from < end.Event; from += min(chunk, end.Event-from) {
		if rows := s.gen.rows(s.table, from, from+min(chunk, end.Event-from), tl); len(rows) > 0 {
			if err := emit(rows); err != nil {
				return err
			}
		}
	}
	return nil
}
