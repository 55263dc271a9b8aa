package engine

// Level is a delivery guarantee.
type Level string

// Delivery guarantees, strongest first.
const (
	// ExactlyOnce: every input row affects the output once, whatever
	// restarts happen.
	ExactlyOnce Level = "exactly-once"
	// AtLeastOnce: a batch replayed after a crash may be written again.
	AtLeastOnce Level = "at-least-once"
	// NoGuarantee: output may be lost or repeated; not fault tolerant.
	NoGuarantee Level = "none"
)

// Guarantee is a delivery guarantee and the reason for it.
type Guarantee struct {
	Level  Level  `json:"level"`
	Reason string `json:"reason"`
}

func (g Guarantee) String() string {
	if g.Reason == "" {
		return string(g.Level)
	}
	return string(g.Level) + " (" + g.Reason + ")"
}

// queryGuarantee combines the sources' and the sink's guarantees: every
// built-in source is replayable from the checkpoint's offsets, so the query
// has the sink's guarantee.
func queryGuarantee(sinkKind string, sink Guarantee) Guarantee {
	g := sink
	if g.Level == "" {
		g = Guarantee{Level: AtLeastOnce, Reason: "the " + sinkKind + " sink does not declare a guarantee; a replayed batch may be written again"}
	}
	return Guarantee{Level: g.Level, Reason: "sources are replayable from the checkpoint's offsets; " + g.Reason}
}
