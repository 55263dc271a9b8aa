package spark

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
)

// This file translates a checked CEL expression of the project's environment (plan.Env) into
// a Spark SQL expression with the same value for every row, or refuses it. It reads only the
// checked AST (node kinds, function names, the checker's types), so it works the same wherever
// the environment lives.
//
// Faithful means: the same value, and where CEL's evaluation errors (an overflow, a division
// by zero, a null operand) Spark yields NULL — the built-in engine turns an evaluation error
// into null in a select and into "drop the row" in a filter, which is what SQL's NULL does.
// Spark 4 runs in ANSI mode, where an overflow or a division by zero fails the query, so
// arithmetic goes through try_add/try_subtract/try_multiply and guarded DIV/%. The one
// deliberate difference is CEL's equality with a null operand (docs/spark.md).

// UnsupportedError says that a CEL construct has no faithful Spark SQL form.
type UnsupportedError struct {
	// Construct names the CEL construct, as a user writes it (a function, an operator).
	Construct string
	// Reason says why it has no faithful form.
	Reason string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("%s has no faithful Spark SQL form: %s", e.Construct, e.Reason)
}

// TranslateCEL returns the Spark SQL form of a checked CEL expression. Column names become
// back-quoted identifiers. A construct without a faithful form is an *UnsupportedError.
func TranslateCEL(checked *cel.Ast) (string, error) {
	if !checked.IsChecked() {
		return "", fmt.Errorf("translate CEL: the expression is not type-checked")
	}
	t := &translator{ast: checked.NativeRep()}
	return t.expr(t.ast.Expr())
}

type translator struct {
	ast *celast.AST
}

func (t *translator) typeOf(e celast.Expr) *types.Type { return t.ast.GetType(e.ID()) }

func isInt(tp *types.Type) bool    { return tp != nil && tp.IsExactType(types.IntType) }
func isDouble(tp *types.Type) bool { return tp != nil && tp.IsExactType(types.DoubleType) }
func isString(tp *types.Type) bool { return tp != nil && tp.IsExactType(types.StringType) }
func isTime(tp *types.Type) bool   { return tp != nil && tp.IsExactType(types.TimestampType) }
func isDuration(tp *types.Type) bool {
	return tp != nil && tp.IsExactType(types.DurationType)
}
func isNull(e celast.Expr) bool {
	return e.Kind() == celast.LiteralKind && e.AsLiteral() == types.NullValue
}

func unsupported(construct, reason string) error {
	return &UnsupportedError{Construct: construct, Reason: reason}
}

func (t *translator) expr(e celast.Expr) (string, error) {
	switch e.Kind() {
	case celast.IdentKind:
		return quoteIdent(e.AsIdent()), nil
	case celast.LiteralKind:
		return literal(e.AsLiteral())
	case celast.CallKind:
		return t.call(e)
	case celast.SelectKind:
		if e.AsSelect().IsTestOnly() {
			return "", unsupported("has()", "columns are not messages or maps")
		}
		return "", unsupported("field selection ."+e.AsSelect().FieldName(), "columns are not messages or maps")
	case celast.ListKind:
		return "", unsupported("a list", "lists are not column values")
	case celast.MapKind, celast.StructKind:
		return "", unsupported("a map or message", "maps and messages are not column values")
	case celast.ComprehensionKind:
		return "", unsupported("a macro (all, exists, map, filter)", "comprehensions work on lists and maps, which columns are not")
	}
	return "", unsupported("this expression", "unknown kind")
}

func (t *translator) args(es []celast.Expr) ([]string, error) {
	out := make([]string, len(es))
	for i, a := range es {
		s, err := t.expr(a)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// asciiLower and asciiUpper are the letters upperAscii and lowerAscii change; Spark's
// upper()/lower() would change every Unicode letter.
const (
	asciiLower = "abcdefghijklmnopqrstuvwxyz"
	asciiUpper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
)

func (t *translator) call(e celast.Expr) (string, error) {
	c := e.AsCall()
	fn := c.FunctionName()
	var args []celast.Expr
	if c.IsMemberFunction() {
		args = append([]celast.Expr{c.Target()}, c.Args()...)
	} else {
		args = c.Args()
	}
	// x == null and x != null are faithful as IS [NOT] NULL: CEL's null equals only null.
	if (fn == operators.Equals || fn == operators.NotEquals) && len(args) == 2 && (isNull(args[0]) || isNull(args[1])) {
		return t.nullComparison(fn, args)
	}
	a, err := t.args(args)
	if err != nil {
		return "", err
	}
	switch fn {
	case operators.LogicalAnd, operators.LogicalOr, operators.LogicalNot, operators.Conditional,
		operators.Equals, operators.NotEquals, operators.Less, operators.LessEquals, operators.Greater, operators.GreaterEquals,
		operators.Add, operators.Subtract, operators.Multiply, operators.Divide, operators.Modulo, operators.Negate:
		return t.operator(fn, args, a, t.typeOf(e))
	case "int", "double", "string", "timestamp", "duration":
		return t.conversion(fn, args, a)
	}
	return t.function(fn, args, a)
}

// nullComparison translates x == null or x != null (one of args is the null literal).
func (t *translator) nullComparison(fn string, args []celast.Expr) (string, error) {
	other := args[0]
	if isNull(other) {
		other = args[1]
	}
	if isNull(other) {
		return strconv.FormatBool(fn == operators.Equals), nil
	}
	s, err := t.expr(other)
	if err != nil {
		return "", err
	}
	if fn == operators.Equals {
		return "(" + s + " IS NULL)", nil
	}
	return "(" + s + " IS NOT NULL)", nil
}

// operator translates a call of a CEL operator whose result has type resT; a are its
// arguments translated.
func (t *translator) operator(fn string, args []celast.Expr, a []string, resT *types.Type) (string, error) {
	switch fn {
	case operators.LogicalAnd:
		return "(" + a[0] + " AND " + a[1] + ")", nil
	case operators.LogicalOr:
		return "(" + a[0] + " OR " + a[1] + ")", nil
	case operators.LogicalNot:
		return "(NOT " + a[0] + ")", nil
	case operators.Conditional:
		// CEL's ternary errs on a null condition; SQL's CASE would take the ELSE branch.
		return "(CASE WHEN " + a[0] + " THEN " + a[1] + " WHEN NOT " + a[0] + " THEN " + a[2] + " END)", nil
	case operators.Equals, operators.NotEquals:
		if t.mixedInexact(args[0], args[1]) {
			return "", unsupported(celFunctionName(fn)+" between an int and a double", "CEL compares them exactly, Spark converts the int to a double first (they differ beyond 2^53); convert one side with double() or int()")
		}
	}
	switch fn {
	case operators.Equals:
		return t.nanGuard(args, a, "FALSE", "("+a[0]+" = "+a[1]+")"), nil
	case operators.NotEquals:
		return t.nanGuard(args, a, "TRUE", "("+a[0]+" <> "+a[1]+")"), nil
	case operators.Less, operators.LessEquals, operators.Greater, operators.GreaterEquals:
		op := map[string]string{operators.Less: "<", operators.LessEquals: "<=", operators.Greater: ">", operators.GreaterEquals: ">="}[fn]
		if t.mixedInexact(args[0], args[1]) {
			return "", unsupported(op+" between an int and a double", "CEL compares them exactly, Spark converts the int to a double first (they differ beyond 2^53); convert one side with double() or int()")
		}
		return t.nanGuard(args, a, "FALSE", "("+a[0]+" "+op+" "+a[1]+")"), nil
	case operators.Add:
		switch {
		case isTime(resT):
			// A timestamp plus a duration (either order): a day-time interval added, null where
			// CEL errs, outside its years 1 to 9999.
			return celTimeRange("(" + a[0] + " + " + a[1] + ")"), nil
		case isInt(resT):
			return "try_add(" + a[0] + ", " + a[1] + ")", nil
		case isDouble(resT):
			return "(" + a[0] + " + " + a[1] + ")", nil
		case isString(resT):
			return "concat(" + a[0] + ", " + a[1] + ")", nil
		}
		return "", unsupported("+ on "+typeName(resT), "only int, double and string addition and a timestamp plus a duration are translated")
	case operators.Subtract:
		switch {
		case isInt(resT):
			return "try_subtract(" + a[0] + ", " + a[1] + ")", nil
		case isDouble(resT):
			return "(" + a[0] + " - " + a[1] + ")", nil
		case isTime(resT):
			return celTimeRange("(" + a[0] + " - " + a[1] + ")"), nil
		}
		return "", unsupported("- on "+typeName(resT), "only int and double subtraction and a timestamp minus a duration are translated")
	case operators.Multiply:
		switch {
		case isInt(resT):
			return "try_multiply(" + a[0] + ", " + a[1] + ")", nil
		case isDouble(resT):
			return "(" + a[0] + " * " + a[1] + ")", nil
		}
		return "", unsupported("* on "+typeName(resT), "only int and double multiplication are translated")
	case operators.Divide, operators.Modulo:
		op := map[string]string{operators.Divide: "DIV", operators.Modulo: "%"}[fn]
		if fn == operators.Divide && isDouble(resT) {
			if d, ok := literalValue(args[1]).(types.Double); ok && d != 0 {
				return "(" + a[0] + " / " + a[1] + ")", nil // a divisor that is never zero
			}
			return doubleDivide(a[0], a[1]), nil
		}
		if !isInt(resT) {
			return "", unsupported(map[string]string{operators.Divide: "/", operators.Modulo: "%"}[fn]+" on "+typeName(resT), "only int division and remainder and double division are translated")
		}
		// CEL errs on a zero divisor and on MinInt64 / -1 (overflow); both are NULL here.
		return fmt.Sprintf("(CASE WHEN %[2]s = 0 OR (%[1]s = %[3]s AND %[2]s = -1L) THEN NULL ELSE %[1]s %[4]s %[2]s END)", a[0], a[1], minInt64, op), nil
	case operators.Negate:
		if isInt(resT) {
			return "try_subtract(0L, " + a[0] + ")", nil
		}
		return "(- " + a[0] + ")", nil
	}
	return "", unsupported(celFunctionName(fn), "not translated")
}

// function translates a call of a CEL function other than an operator or a conversion; a are
// its arguments translated.
func (t *translator) function(fn string, args []celast.Expr, a []string) (string, error) {
	switch fn {
	case "size":
		if len(args) == 1 && isString(t.typeOf(args[0])) {
			return "CAST(char_length(" + a[0] + ") AS BIGINT)", nil // code points, as CEL
		}
		return "", unsupported("size()", "only the size of a string is translated")
	case "contains":
		return "contains(" + a[0] + ", " + a[1] + ")", nil
	case "startsWith":
		return "startswith(" + a[0] + ", " + a[1] + ")", nil
	case "endsWith":
		return "endswith(" + a[0] + ", " + a[1] + ")", nil
	case "upperAscii":
		return "translate(" + a[0] + ", '" + asciiLower + "', '" + asciiUpper + "')", nil
	case "lowerAscii":
		return "translate(" + a[0] + ", '" + asciiUpper + "', '" + asciiLower + "')", nil
	case "replace":
		if len(args) != 3 {
			return "", unsupported("replace() with a count", "Spark's replace has no count")
		}
		if args[1].Kind() != celast.LiteralKind || args[1].AsLiteral() == types.String("") {
			return "", unsupported("replace() with an empty or computed search string", "CEL inserts the replacement between every character, Spark returns the string unchanged")
		}
		return "replace(" + a[0] + ", " + a[1] + ", " + a[2] + ")", nil
	case "matches":
		return "", unsupported("matches()", "CEL's regular expressions are RE2, Spark's are Java's: they differ")
	case "trim":
		return "", unsupported("trim()", "CEL trims Unicode white space, Spark's trim only spaces")
	case "substring", "indexOf", "lastIndexOf", "charAt", "split", "join", "format", "quote", "reverse":
		return "", unsupported(fn+"()", "not translated yet; docs/spark.md lists what is")
	}
	if acc, ok := timeAccessors[fn]; ok {
		if len(args) != 1 || !isTime(t.typeOf(args[0])) {
			return "", unsupported(fn+"() with a time zone or on a duration", "only the UTC accessors of a timestamp are translated")
		}
		return fmt.Sprintf(acc, a[0]), nil
	}
	return "", unsupported(celFunctionName(fn), "not translated")
}

// conversion translates a call of int(), double(), string(), timestamp() or duration(); a are
// its arguments translated.
func (t *translator) conversion(fn string, args []celast.Expr, a []string) (string, error) {
	switch fn {
	case "int":
		at := t.typeOf(args[0])
		switch {
		case isInt(at):
			return a[0], nil
		case isDouble(at):
			// CEL truncates toward zero and errs out of range or on NaN: try_cast yields NULL.
			return "try_cast(" + a[0] + " AS BIGINT)", nil
		case isTime(at):
			return "unix_seconds(" + a[0] + ")", nil
		}
		return "", unsupported("int() of "+typeName(at), "CEL's and Spark's parsing of strings differ")
	case "double":
		at := t.typeOf(args[0])
		switch {
		case isDouble(at):
			return a[0], nil
		case isInt(at):
			return "CAST(" + a[0] + " AS DOUBLE)", nil
		}
		return "", unsupported("double() of "+typeName(at), "CEL's and Spark's parsing of strings differ")
	case "string":
		at := t.typeOf(args[0])
		switch {
		case isString(at):
			return a[0], nil
		case isInt(at), at != nil && at.IsExactType(types.BoolType):
			return "CAST(" + a[0] + " AS STRING)", nil
		}
		return "", unsupported("string() of "+typeName(at), "CEL and Spark format doubles and timestamps differently")
	case "timestamp":
		if isInt(t.typeOf(args[0])) {
			// Epoch seconds; CEL errs outside years 1 to 9999, Spark's timestamp_seconds only on
			// an overflow of its microseconds.
			return fmt.Sprintf("(CASE WHEN %[1]s BETWEEN %[2]dL AND %[3]dL THEN timestamp_seconds(%[1]s) END)", a[0], minCELSeconds, maxCELSeconds), nil
		}
		if args[0].Kind() == celast.LiteralKind {
			return timestampLiteral(args[0].AsLiteral())
		}
		return "", unsupported("timestamp() of a computed value", "CEL parses RFC 3339 strictly, Spark leniently")
	case "duration":
		if isDuration(t.typeOf(args[0])) {
			return a[0], nil
		}
		if args[0].Kind() == celast.LiteralKind {
			return durationLiteral(args[0].AsLiteral())
		}
		return "", unsupported("duration() of a computed value", "CEL parses Go duration strings (1h30m), Spark its own interval strings")
	}
	return "", unsupported(celFunctionName(fn), "not translated")
}

// timeAccessors are CEL's timestamp accessors in UTC (the session time zone is UTC), as Spark
// SQL with the same base: CEL counts months, days of month, of week and of year from 0.
var timeAccessors = map[string]string{
	"getFullYear":     "CAST(year(%s) AS BIGINT)",
	"getMonth":        "CAST(month(%s) - 1 AS BIGINT)",
	"getDayOfYear":    "CAST(dayofyear(%s) - 1 AS BIGINT)",
	"getDayOfMonth":   "CAST(dayofmonth(%s) - 1 AS BIGINT)",
	"getDate":         "CAST(dayofmonth(%s) AS BIGINT)",
	"getDayOfWeek":    "CAST(dayofweek(%s) - 1 AS BIGINT)",
	"getHours":        "CAST(hour(%s) AS BIGINT)",
	"getMinutes":      "CAST(minute(%s) AS BIGINT)",
	"getSeconds":      "CAST(floor(second(%s)) AS BIGINT)",
	"getMilliseconds": "pmod(unix_millis(%s), 1000L)",
}

const minInt64 = "CAST('-9223372036854775808' AS BIGINT)"

// The doubles Spark SQL has no literal for.
const (
	nanSQL    = "CAST('NaN' AS DOUBLE)"
	posInfSQL = "CAST('Infinity' AS DOUBLE)"
	negInfSQL = "CAST('-Infinity' AS DOUBLE)"
)

// doubleDivide is CEL's double division x / y, IEEE 754's: a zero divisor yields ±Infinity, or
// NaN for 0/0 and NaN/0, where Spark (ANSI) would fail the query. The infinity's sign is the
// dividend's times the divisor's, whose zero may be negative: Spark's -0.0 equals 0.0 and has
// no sign function that tells them apart, but its text starts with '-'. A null operand is null.
func doubleDivide(x, y string) string {
	return fmt.Sprintf("(CASE WHEN %[1]s IS NULL OR %[2]s IS NULL THEN NULL WHEN %[2]s <> 0.0D THEN %[1]s / %[2]s "+
		"WHEN isnan(%[1]s) OR %[1]s = 0.0D THEN %[3]s "+
		"WHEN (%[1]s > 0.0D) <> startswith(CAST(%[2]s AS STRING), '-') THEN %[4]s ELSE %[5]s END)", x, y, nanSQL, posInfSQL, negInfSQL)
}

// nanGuard makes a comparison cmp of args (translated: a) CEL's where a double side is NaN: every
// comparison with NaN is false but != (nanResult), where Spark's NaN equals NaN and is greater
// than any other double. A null side stays null (Spark's isnan of null is false, not null).
// Only the sides that can be NaN are guarded: doubles other than literals.
func (t *translator) nanGuard(args []celast.Expr, a []string, nanResult, cmp string) string {
	var null, nan []string
	for i, e := range args {
		if e.Kind() == celast.LiteralKind {
			continue
		}
		null = append(null, a[i]+" IS NULL")
		if isDouble(t.typeOf(e)) {
			nan = append(nan, "isnan("+a[i]+")")
		}
	}
	switch {
	case len(nan) == 0:
		return cmp
	case len(null) == 1: // the one side that may be null is the one guarded: isnan(null) is false
		return "(CASE WHEN " + nan[0] + " THEN " + nanResult + " ELSE " + cmp + " END)"
	}
	return "(CASE WHEN " + strings.Join(null, " OR ") + " THEN NULL WHEN " + strings.Join(nan, " OR ") + " THEN " + nanResult + " ELSE " + cmp + " END)"
}

// celTimeRange is the timestamp ts where CEL has it, years 1 to 9999, and null beyond, where
// CEL's timestamp arithmetic errs.
func celTimeRange(ts string) string {
	return fmt.Sprintf("(CASE WHEN unix_micros(%[1]s) BETWEEN %[2]dL AND %[3]dL THEN %[1]s END)", ts, minCELSeconds*1_000_000, maxCELSeconds*1_000_000+999_999)
}

// mixedInexact reports a comparison of an int with a double that Spark would not make
// exactly: Spark converts the int to a double, which is exact only for an int literal within
// ±2^53 (amount > 0 is fine; amount > qty is not).
func (t *translator) mixedInexact(a, b celast.Expr) bool {
	ta, tb := t.typeOf(a), t.typeOf(b)
	if !(isInt(ta) && isDouble(tb) || isDouble(ta) && isInt(tb)) {
		return false
	}
	intSide := a
	if isDouble(ta) {
		intSide = b
	}
	if intSide.Kind() == celast.LiteralKind {
		if n, ok := intSide.AsLiteral().(types.Int); ok && n >= -(1<<53) && n <= 1<<53 {
			return false
		}
	}
	return true
}

// literalValue is e's value when e is a literal, else nil.
func literalValue(e celast.Expr) any {
	if e.Kind() != celast.LiteralKind {
		return nil
	}
	return e.AsLiteral()
}

func typeName(tp *types.Type) string {
	if tp == nil {
		return "an unknown type"
	}
	return tp.String()
}

// celFunctionName writes an operator as users write it.
func celFunctionName(fn string) string {
	if op, ok := operators.FindReverse(fn); ok && op != "" {
		return op
	}
	return fn + "()"
}

// literal writes a CEL constant as a Spark SQL literal of the column type it stands for.
func literal(v any) (string, error) {
	switch x := v.(type) {
	case types.Int:
		if int64(x) == math.MinInt64 {
			return minInt64, nil
		}
		if x < 0 {
			return "(" + strconv.FormatInt(int64(x), 10) + "L)", nil
		}
		return strconv.FormatInt(int64(x), 10) + "L", nil
	case types.Double:
		return "CAST('" + strconv.FormatFloat(float64(x), 'g', -1, 64) + "' AS DOUBLE)", nil
	case types.String:
		return QuoteString(string(x)), nil
	case types.Bool:
		if x {
			return "TRUE", nil
		}
		return "FALSE", nil
	case types.Null:
		return "NULL", nil
	case types.Uint:
		return "", unsupported("an unsigned literal", "columns are never unsigned")
	case types.Bytes:
		return "", unsupported("a bytes literal", "columns are never bytes")
	}
	return "", unsupported(fmt.Sprintf("the literal %v", v), "not translated")
}

// minCELSeconds and maxCELSeconds bound CEL's timestamps in epoch seconds: 0001-01-01T00:00:00Z
// and 9999-12-31T23:59:59Z.
const (
	minCELSeconds = -62135596800
	maxCELSeconds = 253402300799
)

func timestampLiteral(v any) (string, error) {
	s, ok := v.(types.String)
	if !ok {
		return "", unsupported("timestamp() of a number", "not translated")
	}
	ts, err := parseRFC3339(string(s))
	if err != nil {
		return "", fmt.Errorf("timestamp(%q): %w", string(s), err)
	}
	if ts.Nanosecond()%1000 != 0 {
		return "", unsupported("a timestamp with nanoseconds", "Spark keeps microseconds")
	}
	return fmt.Sprintf("timestamp_micros(%dL)", ts.UnixMicro()), nil
}

// durationLiteral writes duration('<Go duration>') as a Spark day-time interval of seconds,
// exact to the microsecond (Spark's precision).
func durationLiteral(v any) (string, error) {
	s, ok := v.(types.String)
	if !ok {
		return "", unsupported("duration() of a number", "not translated")
	}
	d, err := time.ParseDuration(string(s))
	if err != nil {
		return "", unsupported(fmt.Sprintf("duration(%q)", string(s)), "not a duration CEL accepts, so CEL errs where Spark would need a value")
	}
	if d%time.Microsecond != 0 {
		return "", unsupported("a duration with nanoseconds", "Spark keeps microseconds")
	}
	us := d.Microseconds()
	sign := ""
	if us < 0 {
		sign, us = "-", -us
	}
	secs := fmt.Sprintf("%s%d", sign, us/1e6)
	if frac := us % 1e6; frac != 0 {
		secs += strings.TrimRight(fmt.Sprintf(".%06d", frac), "0")
	}
	return "INTERVAL '" + secs + "' SECOND", nil
}

// QuoteString writes s as a Spark SQL string literal (backslash escapes are on, Spark's default).
func QuoteString(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for _, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '\'':
			b.WriteString(`\'`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// quoteIdent writes a column name as a back-quoted Spark SQL identifier.
func quoteIdent(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}
