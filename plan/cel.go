package plan

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/ext"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// Env returns the CEL environment in which the expressions of a step are compiled: one
// variable per column, typed by the column's type (string → string, long → int,
// double → double, boolean → bool, timestamp → google.protobuf.Timestamp), with the
// standard library and the strings extension (so country.upperAscii() works). Numbers of
// different types compare (amount > 0 for a double amount), but arithmetic does not mix
// them (write amount * double(qty)). Time functions default to UTC. A column of type ""
// (unknown, hidden by an earlier error) is dyn.
//
// The engine evaluates programs of this environment with one activation per row whose
// values are string, int64, float64, bool and time.Time. An Env is safe for concurrent use.
func Env(columns v1.Columns) (*cel.Env, error) {
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
func CompileProjection(env *cel.Env, expr string) (*cel.Ast, v1.ColumnType, error) {
	return compileProjection(env, expr, false)
}

// CompileDuration compiles and type-checks an expression that must yield a duration (a
// session window's gapExpr).
func CompileDuration(env *cel.Env, expr string) (*cel.Ast, error) {
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if t := ast.OutputType(); !t.IsExactType(cel.DurationType) {
		return nil, fmt.Errorf("the expression yields %s; want a duration, such as duration('5m')", t)
	}
	return ast, nil
}

// A compiler compiles the expressions of one spec, each once: validation, the flow and the
// plan ask it for the same expressions over the same columns (a spec's trip through Compile
// used to compile each three times). Not safe for concurrent use; one serves one Build.
type compiler struct {
	envs map[string]*cel.Env
	asts map[string]compiled
}

type compiled struct {
	ast *cel.Ast
	typ v1.ColumnType
	err error
}

func newCompiler() *compiler {
	return &compiler{envs: map[string]*cel.Env{}, asts: map[string]compiled{}}
}

// signature identifies columns by their names and types, in order.
func signature(cols v1.Columns) string {
	var b strings.Builder
	for _, c := range cols {
		b.WriteString(c.Name)
		b.WriteByte(':')
		b.WriteString(string(c.Type))
		b.WriteByte(',')
	}
	return b.String()
}

// env returns the environment of cols (Env), built once per set of columns.
func (c *compiler) env(cols v1.Columns) (*cel.Env, error) {
	key := signature(cols)
	if env, ok := c.envs[key]; ok {
		return env, nil
	}
	env, err := Env(cols)
	if err == nil {
		c.envs[key] = env
	}
	return env, err
}

// compile compiles expr over cols as a filter or a projection (kind), once.
func (c *compiler) compile(kind string, cols v1.Columns, expr string) compiled {
	key := kind + "\x00" + signature(cols) + "\x00" + expr
	if r, ok := c.asts[key]; ok {
		return r
	}
	var r compiled
	env, err := c.env(cols)
	dyn := slices.ContainsFunc(cols, func(col v1.Column) bool { return col.Type == "" })
	switch {
	case err != nil:
		r.err = err
	case kind == "filter":
		r.ast, r.err = compileFilter(env, expr, dyn)
		r.typ = v1.TypeBoolean
	default:
		r.ast, r.typ, r.err = compileProjection(env, expr, dyn)
	}
	c.asts[key] = r
	return r
}

// checkFilter reports why expr is not a filter (a bool expression) over cols. A column of
// type "" is of unknown type (hidden by an earlier error): an expression using it is not
// wrong for that. With known false the columns are unknown and expr is only parsed.
func (c *compiler) checkFilter(cols v1.Columns, known bool, expr string) error {
	if !known {
		return c.parse(expr)
	}
	return c.compile("filter", cols, expr).err
}

// checkProjection returns the column type expr yields over cols, "" when it cannot be known
// (a column of unknown type, or known false), and why expr is not a projection.
func (c *compiler) checkProjection(cols v1.Columns, known bool, expr string) (v1.ColumnType, error) {
	if !known {
		return "", c.parse(expr)
	}
	r := c.compile("projection", cols, expr)
	return r.typ, r.err
}

// parse reports why expr does not parse, in an environment without variables: the columns
// are not known.
func (c *compiler) parse(expr string) error {
	env, err := c.env(nil)
	if err != nil {
		return err
	}
	_, iss := env.Parse(expr)
	return iss.Err()
}

func compileFilter(env *cel.Env, expr string, allowDyn bool) (*cel.Ast, error) {
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	t := ast.OutputType()
	if !t.IsExactType(cel.BoolType) && !(allowDyn && t.IsExactType(cel.DynType)) {
		return nil, fmt.Errorf("a filter must yield a bool, not %s", t)
	}
	return ast, nil
}

func compileProjection(env *cel.Env, expr string, allowDyn bool) (*cel.Ast, v1.ColumnType, error) {
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, "", iss.Err()
	}
	t, ok := columnTypeOf(ast.OutputType())
	switch {
	case ok:
		return ast, t, nil
	case allowDyn && ast.OutputType().IsExactType(cel.DynType):
		return ast, "", nil
	}
	return nil, "", errors.New("the expression yields " + ast.OutputType().String() +
		"; a column is string, long (CEL int), double, boolean (CEL bool) or timestamp")
}

func celType(t v1.ColumnType) (*cel.Type, error) {
	switch t {
	case v1.TypeString:
		return cel.StringType, nil
	case v1.TypeLong:
		return cel.IntType, nil
	case v1.TypeDouble:
		return cel.DoubleType, nil
	case v1.TypeBoolean:
		return cel.BoolType, nil
	case v1.TypeTimestamp:
		return cel.TimestampType, nil
	case "":
		return cel.DynType, nil
	}
	return nil, fmt.Errorf("unknown column type %q", t)
}

func columnTypeOf(t *cel.Type) (v1.ColumnType, bool) {
	for _, ct := range v1.ColumnTypes() {
		if want, _ := celType(ct); t.IsExactType(want) {
			return ct, true
		}
	}
	return "", false
}
