package engine

import (
	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/compat"
)

// Guarantee is a query's delivery guarantee and the reason for it.
type Guarantee struct {
	Level  v1.Guarantee `json:"level"`
	Reason string       `json:"reason"`
}

func (g Guarantee) String() string {
	if g.Reason == "" {
		return string(g.Level)
	}
	return string(g.Level) + " (" + g.Reason + ")"
}

// GuaranteeOf returns the delivery guarantee of a query with spec, as compat.GuaranteeOf
// decides it: the one place it is decided, which lockstep plan, the webhook, the status and
// the Terraform plan report too.
func GuaranteeOf(spec *v1.StreamingQuerySpec) Guarantee {
	level, reason := compat.GuaranteeOf(spec)
	return Guarantee{Level: level, Reason: reason}
}
