package provider

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-dev/lockstep/compat"
)

// attributePath converts a Kubernetes field path of the spec, as in
// spec.transform[3].aggregate.groupBy[0], to the path of the attribute in Terraform,
// transform[3].aggregate.group_by[0]. It follows the field tree as far as it matches and
// returns that prefix; ok is false when not even the first step matches.
func attributePath(spec *field, fieldPath string) (p path.Path, ok bool) {
	rest, found := strings.CutPrefix(fieldPath, "spec.")
	if !found {
		return path.Empty(), false
	}
	f := spec
	first := true
	for _, step := range splitFieldPath(rest) {
		switch {
		case step.index != nil && f.Type == typeList:
			p, f = p.AtListIndex(*step.index), f.Elem
		case step.key != "" && f.Type == typeMap:
			p, f = p.AtMapKey(step.key), f.Elem
		case step.name != "" && f.Type == typeObject:
			c := f.child(step.name)
			if c == nil {
				return p, !first
			}
			if first {
				p = path.Root(c.TF)
			} else {
				p = p.AtName(c.TF)
			}
			f, first = c, false
		default:
			return p, !first
		}
	}
	return p, !first
}

type fieldStep struct {
	name  string
	index *int
	key   string
}

var subscript = regexp.MustCompile(`\[([^\]]*)\]`)

// splitFieldPath splits a.b[2].c[key] into its steps.
func splitFieldPath(s string) []fieldStep {
	var steps []fieldStep
	for part := range strings.SplitSeq(s, ".") {
		name, subs, _ := strings.Cut(part, "[")
		if name != "" {
			steps = append(steps, fieldStep{name: name})
		}
		if subs == "" {
			continue
		}
		for _, m := range subscript.FindAllStringSubmatch("["+subs, -1) {
			if i, err := strconv.Atoi(m[1]); err == nil {
				steps = append(steps, fieldStep{index: &i})
			} else {
				steps = append(steps, fieldStep{key: m[1]})
			}
		}
	}
	return steps
}

// findingDetail renders a finding for a diagnostic: the attribute, the rule, old and new, why,
// and what to do, with the spec's field paths in the message written as Terraform attributes.
func findingDetail(f compat.Finding, spec *field, lead string) string {
	var b strings.Builder
	b.WriteString(lead)
	b.WriteString("\n\n")
	if p, ok := attributePath(spec, f.Path); ok {
		fmt.Fprintf(&b, "Attribute: %s\n", p)
	}
	fmt.Fprintf(&b, "Rule: %s\n", f.Rule)
	if f.Old != "" || f.New != "" {
		fmt.Fprintf(&b, "Change: %s → %s\n", orAbsent(f.Old), orAbsent(f.New))
	}
	fmt.Fprintf(&b, "\n%s", terraformPaths(spec, f.Message))
	if f.Remedy != "" {
		fmt.Fprintf(&b, "\n\nWhat to do: %s", terraformPaths(spec, f.Remedy))
	}
	return b.String()
}

// specPath matches a field path of the spec in a message: spec.sources[0].files.path.
var specPath = regexp.MustCompile(`\bspec(\.[A-Za-z][A-Za-z0-9]*(\[[^\]\s]*\])*)+`)

// terraformPaths rewrites the spec's field paths in text as Terraform attribute paths, the
// names the user wrote: spec.checkpoint.location → checkpoint.location.
func terraformPaths(spec *field, text string) string {
	return specPath.ReplaceAllStringFunc(text, func(m string) string {
		trimmed := strings.TrimRight(m, ".")
		if p, ok := attributePath(spec, trimmed); ok && len(p.Steps()) == strings.Count(trimmed, ".")+strings.Count(trimmed, "[") {
			return p.String() + m[len(trimmed):]
		}
		return m
	})
}

// diagnosticPath returns where Terraform shows a diagnostic: the top-level attribute of p.
// Terraform locates a diagnostic in the configuration only through blocks and top-level
// attributes, not inside the value of a nested attribute, so a deeper path would point at the
// resource as a whole; the detail names the full path instead.
func diagnosticPath(p path.Path) path.Path {
	steps := p.Steps()
	if len(steps) == 0 {
		return p
	}
	if name, ok := steps[0].(path.PathStepAttributeName); ok {
		return path.Root(string(name))
	}
	return p
}

func orAbsent(s string) string {
	if s == "" {
		return "(absent)"
	}
	return strconv.Quote(s)
}

// Leads of the diagnostics for a refused and a warned change.
const (
	refusedLead = "The API server's admission webhook compared this change with what the query's " +
		"existing checkpoint recorded, and refused it: the restarted query would fail or compute wrong results."
	warnedLead = "The API server's admission webhook compared this change with what the query's " +
		"existing checkpoint recorded. It is allowed, with an effect you should know about."
	// warnedAloneLead is for the rules that judge the new spec alone, which hold with no
	// checkpoint too (compat.Rule.Fresh).
	warnedAloneLead = "The API server's admission webhook judged the query's spec on its own (this rule needs " +
		"no checkpoint). It is allowed, with an effect you should know about."
)

// judgesSpecAlone reports whether compat rule id judges the new spec without a checkpoint.
func judgesSpecAlone(id string) bool {
	for _, r := range compat.Rules() {
		if r.ID == id {
			return r.Fresh
		}
	}
	return false
}

// addAPIError turns an error of the API server into diagnostics. An Invalid or Forbidden
// status with field causes becomes one error per cause on the attribute it names; a compat
// refusal is laid out as rule, change, reason and remedy.
func addAPIError(diags *diag.Diagnostics, spec *field, op string, err error) {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		diags.AddError("Cannot Reach The Cluster", fmt.Sprintf("%s: %v.", capitalize(op), err))
		return
	}
	st := se.Status()
	var causes []metav1.StatusCause
	if st.Details != nil {
		causes = st.Details.Causes
	}
	if len(causes) == 0 || st.Reason == metav1.StatusReasonInternalError || !slices.ContainsFunc(causes, func(c metav1.StatusCause) bool { return c.Field != "" }) {
		diags.AddError(statusSummary(st), fmt.Sprintf("%s: %s", capitalize(op), st.Message)+hint(st))
		return
	}
	for _, c := range causes {
		msg := c.Message
		p, ok := attributePath(spec, c.Field)
		where := c.Field
		if ok {
			where = p.String()
		}
		summary, detail := "Invalid Streaming Query", fmt.Sprintf("The API server refused the query: %s: %s", where, terraformPaths(spec, msg))
		if f, isFinding := compat.ParseFindingText(msg); isFinding && f.Severity == compat.Rejected {
			summary, detail = "Checkpoint Refuses The Change", findingDetail(f, spec, refusedLead)
		}
		if ok {
			diags.AddAttributeError(diagnosticPath(p), summary, detail)
		} else {
			diags.AddError(summary, detail)
		}
	}
}

// hint adds what to check to an error of the API server that no field explains.
func hint(st metav1.Status) string {
	if st.Reason == metav1.StatusReasonInternalError {
		return "\n\nThe API server could not complete the request, most often because it could not call " +
			"Lockstep's admission webhook: check that the Lockstep controller is running and ready " +
			"(kubectl get pods -A -l app.kubernetes.io/name=lockstep) and that its webhook Service answers."
	}
	return ""
}

func statusSummary(st metav1.Status) string {
	switch st.Reason {
	case metav1.StatusReasonInternalError:
		return "Cluster Could Not Check The Query"
	case metav1.StatusReasonForbidden:
		return "Not Allowed By The Cluster"
	case metav1.StatusReasonNotFound:
		return "Not Found"
	case metav1.StatusReasonInvalid:
		return "Invalid Streaming Query"
	}
	return "Cluster Refused The Request"
}

// addWarning turns an admission warning, "<field path>: <text>", into a warning diagnostic on
// the attribute it names.
func addWarning(diags *diag.Diagnostics, spec *field, text string) {
	fieldPath, msg, _ := strings.Cut(text, ": ")
	summary, detail := "Warning From The Cluster", terraformPaths(spec, text)
	if f, ok := compat.ParseFindingText(msg); ok {
		lead := warnedLead
		if judgesSpecAlone(f.Rule) {
			lead = warnedAloneLead
		}
		summary, detail = warningSummary(f.Rule), findingDetail(f, spec, lead)
	}
	if p, ok := attributePath(spec, fieldPath); ok {
		diags.AddAttributeWarning(diagnosticPath(p), summary, detail)
		return
	}
	diags.AddWarning(summary, detail)
}

// warningSummary is the summary of a warning finding of rule: the rule's title, so that each
// rule has its own. Terraform folds warnings that share a summary into "(and one more similar
// warning elsewhere)", which would hide every finding but the first.
func warningSummary(rule string) string {
	title := ""
	for _, r := range compat.Rules() {
		if r.ID == rule {
			title = r.Title
		}
	}
	if title == "" {
		return "Change Allowed With A Warning (" + rule + ")"
	}
	words := strings.Fields(title)
	for i, w := range words {
		words[i] = capitalize(w)
	}
	return strings.Join(words, " ")
}
