package compat

import (
	"bufio"
	"fmt"
	"io"
)

// mark is the sign a finding of this severity is printed with.
func (s Severity) mark() string {
	switch s {
	case Warning:
		return "!"
	case Rejected:
		return "✗"
	}
	return "✓"
}

// WriteText writes the verdict for people, like a Terraform plan: one line per finding with
// its mark (✓ allowed, ! warning, ✗ rejected), rule and path, then the old and new values,
// the message and the remedy indented below it; then the verdict with the count per
// severity, and the delivery guarantee with its reason. `lockstep plan`, `lockstep run` and
// the engine print verdicts with it, so users see the same text everywhere.
func (v Verdict) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	switch {
	case v.Fresh:
		fmt.Fprintln(b, "No checkpoint yet: everything is allowed, and every source starts at its starting position.")
		if len(v.Findings) > 0 {
			fmt.Fprintln(b)
		}
	case len(v.Findings) == 0:
		fmt.Fprintln(b, "No changes that matter to the checkpoint.")
	}
	counts := map[Severity]int{}
	for _, f := range v.Findings {
		counts[f.Severity]++
		fmt.Fprintf(b, "%s %s %s\n", f.Severity.mark(), f.Rule, f.Path)
		if f.Old != "" || f.New != "" {
			fmt.Fprintf(b, "    %s → %s\n", orNone(f.Old), orNone(f.New))
		}
		fmt.Fprintf(b, "    %s\n", f.Message)
		if f.Remedy != "" {
			fmt.Fprintf(b, "    Remedy: %s\n", f.Remedy)
		}
	}
	fmt.Fprintf(b, "\nVerdict: %s (%d rejected, %d with a warning, %d allowed)\n", v.Severity, counts[Rejected], counts[Warning], counts[Allowed])
	fmt.Fprintf(b, "Guarantee: %s. %s\n", v.Guarantee, v.GuaranteeReason)
	return b.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
