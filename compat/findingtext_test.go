package compat_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/compat"
)

func TestFindingTextRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    compat.Finding
		want string
	}{
		{"changed", compat.Finding{Rule: "files-path", Severity: compat.Rejected, Path: "spec.sources[0].files.path", Old: "a", New: "b", Message: "Moved.", Remedy: "Revert."},
			`[rejected] files-path at spec.sources[0].files.path: "a" → "b": Moved. Remedy: Revert.`},
		{"added", compat.Finding{Rule: "source-added", Severity: compat.Allowed, Path: "spec.sources", New: "orders", Message: "Added."},
			`[allowed] source-added at spec.sources: "orders": Added.`},
		{"removed", compat.Finding{Rule: "source-removed", Severity: compat.Allowed, Path: "spec.sources", Old: "orders", Message: "Removed."},
			`[allowed] source-removed at spec.sources: "orders" → "": Removed.`},
		{"no values", compat.Finding{Rule: compat.RuleSinkGuarantee, Severity: compat.Warning, Path: "spec", Message: "Weaker.", Remedy: "Keep it."},
			`[warning] sink-guarantee at spec: Weaker. Remedy: Keep it.`},
		{"values with quotes and arrows", compat.Finding{Rule: "output-columns", Severity: compat.Warning, Path: "spec.transform[1].select",
			Old: `a "b" → c`, New: "x: y", Message: `Columns "a" and "b" differ: see below.`, Remedy: "Revert it."},
			`[warning] output-columns at spec.transform[1].select: "a \"b\" → c" → "x: y": Columns "a" and "b" differ: see below. Remedy: Revert it.`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := compat.FindingText(tc.f)
			if got != tc.want {
				t.Errorf("FindingText = %q, want %q", got, tc.want)
			}
			for _, text := range []string{got, "Forbidden: " + got, tc.f.Path + ": " + got} {
				back, ok := compat.ParseFindingText(text)
				if !ok {
					t.Fatalf("ParseFindingText(%q) found no finding", text)
				}
				if diff := cmp.Diff(tc.f, back); diff != "" {
					t.Errorf("ParseFindingText(%q) (-want +got):\n%s", text, diff)
				}
			}
		})
	}
	for _, text := range []string{"spec.checkpoint: could not read the checkpoint", "[warning] no path here", "[bogus] r at p: m"} {
		if f, ok := compat.ParseFindingText(text); ok {
			t.Errorf("ParseFindingText(%q) = %+v, want none", text, f)
		}
	}
}
