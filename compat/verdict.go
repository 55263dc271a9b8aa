package compat

import (
	"fmt"
	"strings"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// Severity says how a change is judged. Severities are ordered: Allowed < Warning < Rejected.
type Severity string

// Severities.
const (
	// Allowed: the restarted query continues with a well-defined effect.
	Allowed Severity = "allowed"
	// Warning: allowed, but the effect is one the user must know (e.g. a new sink sees only
	// new data).
	Warning Severity = "warning"
	// Rejected: the restarted query would fail or silently compute wrong results.
	Rejected Severity = "rejected"
)

func (s Severity) rank() int {
	switch s {
	case Warning:
		return 1
	case Rejected:
		return 2
	}
	return 0
}

// Finding is one change that matters to the checkpoint.
type Finding struct {
	// Rule is the id of the rule in Rules that found it.
	Rule     string   `json:"rule"`
	Severity Severity `json:"severity"`
	// Path is the field of the new spec, as in spec.transform[3].aggregate.groupBy[0]; for
	// something removed, the list it was removed from.
	Path string `json:"path"`
	// Old and New are the values before and after; "" is absent.
	Old string `json:"old"`
	New string `json:"new"`
	// Message says in one sentence what changed and what it does to the checkpoint.
	Message string `json:"message"`
	// Remedy says how to go on: for a rejected change, revert it or start fresh at a new
	// checkpoint location (and what that means for the sink); for a warning, how to avoid
	// the effect. Empty for an allowed change.
	Remedy string `json:"remedy"`
}

// Verdict is the judgement of a new spec against what a checkpoint recorded.
type Verdict struct {
	// Severity is the most severe of the findings' severities; Allowed without findings.
	Severity Severity `json:"verdict"`
	// Guarantee is the new query's delivery guarantee, and GuaranteeReason why.
	Guarantee       v1.Guarantee `json:"guarantee"`
	GuaranteeReason string       `json:"guaranteeReason"`
	// Findings are in the order of Rules, then of the spec. Never nil.
	Findings []Finding `json:"findings"`
	// Fresh is true when there was no checkpoint to judge against: everything is allowed,
	// and the findings are only those of the rules that judge the new spec alone (warnings
	// such as unbounded-state).
	Fresh bool `json:"fresh,omitempty"`
	// Rebuild is true when the spec asks for a rebuild (spec.onIncompatibleChange: rebuild)
	// and one answers every finding that would have rejected the change: those findings are
	// warnings that say so, and the runtime must rebuild the state before it runs on
	// (RebuildRequiredError).
	Rebuild bool `json:"rebuild,omitempty"`
}

// Rejected returns the rejected findings.
func (v Verdict) Rejected() []Finding { return v.with(Rejected) }

// Warnings returns the findings allowed with a warning, which the runtimes log at start.
func (v Verdict) Warnings() []Finding { return v.with(Warning) }

func (v Verdict) with(s Severity) []Finding {
	var out []Finding
	for _, f := range v.Findings {
		if f.Severity == s {
			out = append(out, f)
		}
	}
	return out
}

// Check judges the spec new against old, the shape a checkpoint recorded, by running every
// rule of Rules in order. The zero old Shape means there is no checkpoint yet: the verdict is
// Fresh, and only the rules that judge the new spec alone (Rule.Fresh) run, so everything is
// allowed, possibly with warnings. A new spec that does not validate is rejected with the
// finding invalid-spec. Check does no I/O and does not change new.
func Check(old Shape, new *v1.StreamingQuerySpec, opts ...Option) Verdict {
	g, reason := GuaranteeOf(new)
	v := Verdict{Severity: Allowed, Guarantee: g, GuaranteeReason: reason, Findings: []Finding{}}
	c := &change{old: old, out: options(opts)}
	c.spec = new.DeepCopy()
	c.spec.Default()
	c.new, c.err = ShapeOf(c.spec, opts...)
	v.Fresh = old.IsZero() && c.err == nil
	for _, r := range rules {
		if v.Fresh && !r.Fresh {
			continue
		}
		for _, f := range r.check(c) {
			f.Rule = r.ID
			v.Findings = append(v.Findings, f)
			if f.Severity.rank() > v.Severity.rank() {
				v.Severity = f.Severity
			}
		}
		if c.stop {
			break
		}
	}
	return v
}

// RejectedError is a change the checkpoint refuses. Its message lists the rejected findings;
// Verdict.WriteText prints the whole verdict.
type RejectedError struct {
	Verdict Verdict
}

func (e *RejectedError) Error() string {
	var b strings.Builder
	rejected := e.Verdict.Rejected()
	fmt.Fprintf(&b, "the checkpoint refuses the change (%d rejected):", len(rejected))
	for _, f := range rejected {
		fmt.Fprintf(&b, "\n  %s %s at %s: %s", Rejected.mark(), f.Rule, f.Path, f.Message)
	}
	return b.String()
}
