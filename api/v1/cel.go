package v1

import (
	"fmt"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/ext"
)

// CELEnv returns the CEL environment in which the expressions of a step are compiled: one
// variable per column, typed by the column's type (string → string, long → int,
// double → double, boolean → bool, timestamp → google.protobuf.Timestamp), with the
// standard library and the strings extension (so country.upperAscii() works). Numbers of
// different types compare (amount > 0 for a double amount), but arithmetic does not mix
// them (write amount * double(qty)). Time functions default to UTC.
//
// The engine evaluates programs of this environment with one activation per row whose
// values are string, int64, float64, bool and time.Time. An Env is safe for concurrent use.
func CELEnv(columns Columns) (*cel.Env, error) {
	opts := make([]cel.EnvOption, 0, len(columns)+3)
	for _, c := range columns {
		t, err := celType(c.Type)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", c.Name, err)
		}
		opts = append(opts, cel.Variable(c.Name, t))
	}
	opts = append(opts,
		ext.Strings(),
		// amount > 0 should mean what it says for a double column.
		cel.CrossTypeNumericComparisons(true),
		// Timestamps are UTC instants; ts.getHours() is the UTC hour.
		cel.DefaultUTCTimeZone(true),
	)
	env, err := cel.NewEnv(opts...)
	if err != nil {
		return nil, fmt.Errorf("build CEL environment: %w", err)
	}
	return env, nil
}

// CompileFilter compiles and type-checks a filter expression, which must yield a bool.
func CompileFilter(env *cel.Env, expr string) (*cel.Ast, error) {
	return compileFilter(env, expr, false)
}

// CompileProjection compiles and type-checks a select expression and returns the column type
// it yields. Expressions whose type is not one of the column types (lists, maps, bytes,
// uint, dyn, null) are errors.
func CompileProjection(env *cel.Env, expr string) (*cel.Ast, ColumnType, error) {
	return compileProjection(env, expr, false)
}

// unknownType marks a column whose type could not be determined because of an earlier error;
// CEL treats it as dyn so that later steps are still checked.
const unknownType ColumnType = ""

func celType(t ColumnType) (*cel.Type, error) {
	switch t {
	case TypeString:
		return cel.StringType, nil
	case TypeLong:
		return cel.IntType, nil
	case TypeDouble:
		return cel.DoubleType, nil
	case TypeBoolean:
		return cel.BoolType, nil
	case TypeTimestamp:
		return cel.TimestampType, nil
	case unknownType:
		return cel.DynType, nil
	}
	return nil, fmt.Errorf("unknown column type %q", t)
}

func columnTypeOf(t *cel.Type) (ColumnType, bool) {
	for _, ct := range ColumnTypes() {
		if want, _ := celType(ct); t.IsExactType(want) {
			return ct, true
		}
	}
	return "", false
}
