package compat

import (
	"fmt"
	"strconv"
	"strings"
)

// FindingText renders f on one line, as the admission webhook's refusals and warnings and
// the Compatible condition show it:
//
//	[rejected] files-path at spec.sources[0].files.path: "a" → "b": message Remedy: remedy
//
// A finding without an old value (something added) shows only the new one ("b": …); one
// without values (a rule about the spec as a whole) shows neither. ParseFindingText reads it
// back: the pair is how a finding crosses the admission boundary, so that a client such as
// the Terraform provider gets the rule, the path, both values and the remedy as data.
func FindingText(f Finding) string {
	s := fmt.Sprintf("[%s] %s at %s: ", f.Severity, f.Rule, f.Path)
	switch {
	case f.Old != "":
		s += strconv.Quote(f.Old) + " → " + strconv.Quote(f.New) + ": "
	case f.New != "":
		s += strconv.Quote(f.New) + ": "
	}
	s += f.Message
	if f.Remedy != "" {
		s += remedyMark + f.Remedy
	}
	return s
}

const remedyMark = " Remedy: "

// ParseFindingText reads a finding FindingText wrote from text, which may carry a prefix (the
// API server writes a cause as "Forbidden: <detail>"; a warning is "<path>: <text>"). It
// reports false when text holds no such finding.
func ParseFindingText(text string) (Finding, bool) {
	for _, sev := range []Severity{Rejected, Warning, Allowed} {
		i := strings.Index(text, "["+string(sev)+"] ")
		if i < 0 {
			continue
		}
		if f, ok := parseFinding(sev, strings.TrimSpace(text[i+len(sev)+3:])); ok {
			return f, true
		}
	}
	return Finding{}, false
}

func parseFinding(sev Severity, s string) (Finding, bool) {
	f := Finding{Severity: sev}
	var ok bool
	if f.Rule, s, ok = strings.Cut(s, " at "); !ok || f.Rule == "" || strings.ContainsAny(f.Rule, " \t") {
		return Finding{}, false
	}
	if f.Path, s, ok = strings.Cut(s, ": "); !ok || f.Path == "" || strings.ContainsAny(f.Path, " \t") {
		return Finding{}, false
	}
	if strings.HasPrefix(s, `"`) {
		first, rest, err := unquotePrefix(s)
		if err != nil {
			return Finding{}, false
		}
		if after, isChange := strings.CutPrefix(rest, " → "); isChange {
			second, rest2, err := unquotePrefix(after)
			if err != nil {
				return Finding{}, false
			}
			f.Old, f.New, rest = first, second, rest2
		} else {
			f.New = first
		}
		if s, ok = strings.CutPrefix(rest, ": "); !ok {
			return Finding{}, false
		}
	}
	if i := strings.LastIndex(s, remedyMark); i >= 0 {
		s, f.Remedy = s[:i], s[i+len(remedyMark):]
	}
	f.Message = s
	return f, true
}

func unquotePrefix(s string) (value, rest string, err error) {
	q, err := strconv.QuotedPrefix(s)
	if err != nil {
		return "", "", err
	}
	value, err = strconv.Unquote(q)
	return value, s[len(q):], err
}
