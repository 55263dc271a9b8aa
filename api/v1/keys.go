package v1

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// UpsertKeys returns the output columns that identify a row for a sink that upserts in
// update mode (delta's MERGE, postgres' INSERT … ON CONFLICT): the sink's declared keys
// (delta mergeKeys, postgres keyColumns), else the grouping keys of the aggregate, in order
// (a window yields window_start and window_end). A global aggregate has no keys: every
// batch replaces its one row. ok is false when the query has neither.
func (s *StreamingQuerySpec) UpsertKeys() (keys []string, ok bool) {
	if d := s.Sink.DeclaredKeys(); len(d) > 0 {
		return d, true
	}
	return s.groupKeyColumns()
}

// DeclaredKeys returns the key columns the sink's spec names, nil if none.
func (s *Sink) DeclaredKeys() []string {
	switch {
	case s.Delta != nil:
		return s.Delta.MergeKeys
	case s.Postgres != nil:
		return s.Postgres.KeyColumns
	}
	return nil
}

// Upserts reports whether the sink kind writes update mode as an upsert by key.
func (k SinkKind) Upserts() bool { return k == SinkDelta || k == SinkPostgres }

// groupKeyColumns returns the output columns of the grouping keys of the aggregate whose rows
// reach the sink (the last), and false when the query has no aggregate.
func (s *StreamingQuerySpec) groupKeyColumns() ([]string, bool) {
	for i := len(s.Transform) - 1; i >= 0; i-- {
		a := s.Transform[i].Aggregate
		if a == nil {
			continue
		}
		keys := []string{}
		for _, g := range a.GroupBy {
			if g.Window != nil || g.Session != nil {
				keys = append(keys, ColumnWindowStart, ColumnWindowEnd)
			} else {
				keys = append(keys, g.Column)
			}
		}
		return keys, true
	}
	return nil, false
}

// validateUpsertKeys checks that an upserting sink in update mode has keys: declared, or an
// aggregation's grouping keys. That the grouping keys reach the sink is the plan's to check.
func (s *StreamingQuerySpec) validateUpsertKeys() field.ErrorList {
	kind := s.Sink.Kind()
	if !kind.Upserts() {
		return nil
	}
	p := s.UpsertKeysPath()
	declared := s.Sink.DeclaredKeys()
	group, agg := s.groupKeyColumns()
	switch {
	case !agg && len(declared) == 0:
		return field.ErrorList{field.Required(p, "update mode replaces rows by key: a query without an aggregation must name the output columns that identify a row")}
	case agg && len(declared) > 0:
		if !slices.Equal(slices.Sorted(slices.Values(declared)), slices.Sorted(slices.Values(group))) {
			return field.ErrorList{field.Invalid(p, strings.Join(declared, ","),
				fmt.Sprintf("with an aggregation the keys are its grouping keys (%s): name exactly those, or omit the field", strings.Join(group, ", ")))}
		}
	}
	return nil
}

// UpsertKeysPath returns the path of the field that names an upserting sink's keys:
// spec.sink.delta.mergeKeys or spec.sink.postgres.keyColumns.
func (s *StreamingQuerySpec) UpsertKeysPath() *field.Path {
	kind := s.Sink.Kind()
	if kind == SinkPostgres {
		return field.NewPath("spec", "sink", string(kind), "keyColumns")
	}
	return field.NewPath("spec", "sink", string(kind), "mergeKeys")
}

// pgTable is a PostgreSQL table name, optionally schema-qualified, of unquoted identifiers.
var pgTable = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}(\.[a-z_][a-z0-9_]{0,62})?$`)

func (pg *PostgresSink) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	cp := p.Child("connection")
	c := pg.Connection
	switch {
	case c.SecretName == "" && c.DSNEnv == "":
		errs = append(errs, field.Required(cp, "one of secretName (a Secret with key dsn) or dsnEnv (an environment variable)"))
	case c.SecretName != "" && c.DSNEnv != "":
		errs = append(errs, field.Invalid(cp, "secretName, dsnEnv", "exactly one of secretName, dsnEnv may be set"))
	case c.SecretName != "":
		errs = append(errs, dnsSubdomain(cp.Child("secretName"), c.SecretName)...)
	default:
		if !envName.MatchString(c.DSNEnv) {
			errs = append(errs, field.Invalid(cp.Child("dsnEnv"), c.DSNEnv, "must be an environment variable name"))
		}
	}
	if pg.Table == "" {
		errs = append(errs, field.Required(p.Child("table"), "the table written: name or schema.name"))
	} else if !pgTable.MatchString(pg.Table) {
		errs = append(errs, field.Invalid(p.Child("table"), pg.Table, "must be name or schema.name of lowercase letters, digits and _, starting with a letter or _"))
	}
	for i, k := range pg.KeyColumns {
		if !pgTable.MatchString(k) || strings.Contains(k, ".") {
			errs = append(errs, field.Invalid(p.Child("keyColumns").Index(i), k, "must be a PostgreSQL identifier of lowercase letters, digits and _"))
		}
	}
	return append(errs, columnRefs(p.Child("keyColumns"), pg.KeyColumns)...)
}
