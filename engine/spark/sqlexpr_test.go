package spark_test

import (
	"errors"
	"testing"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine/spark"
	lplan "github.com/lockstep-dev/lockstep/plan"
)

var exprColumns = v1.Columns{
	{Name: "id", Type: v1.TypeString},
	{Name: "qty", Type: v1.TypeLong},
	{Name: "amount", Type: v1.TypeDouble},
	{Name: "ok", Type: v1.TypeBoolean},
	{Name: "ts", Type: v1.TypeTimestamp},
}

// translate translates expr as the one projection of a select over exprColumns, compiled by
// the logical plan.
func translate(t *testing.T, expr string) (string, error) {
	t.Helper()
	spec := qt.Make("q", "ns").FilesSource("rows", "/in", v1.FormatJSON, exprColumns...).
		Select(v1.Projection{Name: "x", Expr: expr}).FilesSink("/out", v1.FormatJSON).Spec()
	p, errs := lplan.Build(spec)
	if len(errs) > 0 {
		t.Fatalf("compile %q: %v", expr, errs.ToAggregate())
	}
	return spark.TranslateCEL(p.Steps[0].Select[0].Expr.AST)
}

func TestTranslateCEL(t *testing.T) {
	tests := []struct {
		expr, want string
	}{
		{"id", "`id`"},
		{"qty > 3", "(`qty` > 3L)"},
		{"qty != 3", "(`qty` <> 3L)"},
		{"amount > 0.5 && ok", "((CASE WHEN isnan(`amount`) THEN FALSE ELSE (`amount` > CAST('0.5' AS DOUBLE)) END) AND `ok`)"},
		{"amount != amount * 2.0", "(CASE WHEN `amount` IS NULL OR (`amount` * CAST('2' AS DOUBLE)) IS NULL THEN NULL WHEN isnan(`amount`) OR isnan((`amount` * CAST('2' AS DOUBLE))) THEN TRUE ELSE (`amount` <> (`amount` * CAST('2' AS DOUBLE))) END)"},
		{"!ok || qty <= -2", "((NOT `ok`) OR (`qty` <= (-2L)))"},
		{"qty + 1", "try_add(`qty`, 1L)"},
		{"qty - 1", "try_subtract(`qty`, 1L)"},
		{"qty * qty", "try_multiply(`qty`, `qty`)"},
		{"-qty", "try_subtract(0L, `qty`)"},
		{"amount * 2.0", "(`amount` * CAST('2' AS DOUBLE))"},
		{"qty / 2", "(CASE WHEN 2L = 0 OR (`qty` = CAST('-9223372036854775808' AS BIGINT) AND 2L = -1L) THEN NULL ELSE `qty` DIV 2L END)"},
		{"qty % 3", "(CASE WHEN 3L = 0 OR (`qty` = CAST('-9223372036854775808' AS BIGINT) AND 3L = -1L) THEN NULL ELSE `qty` % 3L END)"},
		{"id + 'x'", "concat(`id`, 'x')"},
		{`"it's".size()`, "CAST(char_length('it\\'s') AS BIGINT)"},
		{"id.upperAscii()", "translate(`id`, 'abcdefghijklmnopqrstuvwxyz', 'ABCDEFGHIJKLMNOPQRSTUVWXYZ')"},
		{"id.startsWith('a')", "startswith(`id`, 'a')"},
		{"id.contains('\\\\')", "contains(`id`, '\\\\')"},
		{"amount > 0", "(CASE WHEN isnan(`amount`) THEN FALSE ELSE (`amount` > 0L) END)"},
		{"amount / 2.0", "(`amount` / CAST('2' AS DOUBLE))"},
		{"1.0 / amount", "(CASE WHEN CAST('1' AS DOUBLE) IS NULL OR `amount` IS NULL THEN NULL WHEN `amount` <> 0.0D THEN CAST('1' AS DOUBLE) / `amount` " +
			"WHEN isnan(CAST('1' AS DOUBLE)) OR CAST('1' AS DOUBLE) = 0.0D THEN CAST('NaN' AS DOUBLE) " +
			"WHEN (CAST('1' AS DOUBLE) > 0.0D) <> startswith(CAST(`amount` AS STRING), '-') THEN CAST('Infinity' AS DOUBLE) ELSE CAST('-Infinity' AS DOUBLE) END)"},
		{"ts + duration('90m')", "(CASE WHEN unix_micros((`ts` + INTERVAL '5400' SECOND)) BETWEEN -62135596800000000L AND 253402300799999999L THEN (`ts` + INTERVAL '5400' SECOND) END)"},
		{"duration('1s') + ts", "(CASE WHEN unix_micros((INTERVAL '1' SECOND + `ts`)) BETWEEN -62135596800000000L AND 253402300799999999L THEN (INTERVAL '1' SECOND + `ts`) END)"},
		{"ts - duration('1.5s')", "(CASE WHEN unix_micros((`ts` - INTERVAL '1.5' SECOND)) BETWEEN -62135596800000000L AND 253402300799999999L THEN (`ts` - INTERVAL '1.5' SECOND) END)"},
		{"ok ? qty : 0", "(CASE WHEN `ok` THEN `qty` WHEN NOT `ok` THEN 0L END)"},
		{"int(amount)", "try_cast(`amount` AS BIGINT)"},
		{"double(qty)", "CAST(`qty` AS DOUBLE)"},
		{"string(qty)", "CAST(`qty` AS STRING)"},
		{"ts.getHours()", "CAST(hour(`ts`) AS BIGINT)"},
		{"ts.getMonth()", "CAST(month(`ts`) - 1 AS BIGINT)"},
		{"ts > timestamp('2024-01-01T00:00:00Z')", "(`ts` > timestamp_micros(1704067200000000L))"},
		{"timestamp(int(ts) / 10 * 10)", "(CASE WHEN try_multiply((CASE WHEN 10L = 0 OR (unix_seconds(`ts`) = CAST('-9223372036854775808' AS BIGINT) AND 10L = -1L) THEN NULL ELSE unix_seconds(`ts`) DIV 10L END), 10L) BETWEEN -62135596800L AND 253402300799L THEN timestamp_seconds(try_multiply((CASE WHEN 10L = 0 OR (unix_seconds(`ts`) = CAST('-9223372036854775808' AS BIGINT) AND 10L = -1L) THEN NULL ELSE unix_seconds(`ts`) DIV 10L END), 10L)) END)"},
		{"(ok ? duration('1m30s') : duration('-1.5ms')) > duration('0s')", "((CASE WHEN `ok` THEN INTERVAL '90' SECOND WHEN NOT `ok` THEN INTERVAL '-0.0015' SECOND END) > INTERVAL '0' SECOND)"},
		{"duration(duration('1us')) == duration('2562047h')", "(INTERVAL '0.000001' SECOND = INTERVAL '9223369200' SECOND)"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			got, err := translate(t, tt.expr)
			if err != nil || got != tt.want {
				t.Errorf("TranslateCEL(%s) = %s, %v, want %s", tt.expr, got, err, tt.want)
			}
		})
	}
}

// TestTranslateCELRefuses: a construct without a faithful Spark SQL form is refused with an
// *UnsupportedError naming it.
func TestTranslateCELRefuses(t *testing.T) {
	tests := []struct {
		expr, construct string
	}{
		{"id.matches('a+')", "matches()"},
		{"id.trim()", "trim()"},
		{"ts - ts > duration('1s')", "- on google.protobuf.Duration"},
		{"duration('1s') + duration('1s') > duration('1s')", "+ on google.protobuf.Duration"},
		{"qty > 2.5", "> between an int and a double"},
		{"amount < qty", "< between an int and a double"},
		{"amount > 9007199254740993", "> between an int and a double"},
		{"string(amount)", "string() of double"},
		{"qty in [1, 2]", "a list"},
		{"id.substring(1)", "substring()"},
		{"id.replace('', 'x')", "replace() with an empty or computed search string"},
		{"duration(id) > duration('1s')", "duration() of a computed value"},
		{"duration('1500ns') > duration('1s')", "a duration with nanoseconds"},
		{"duration('soon') > duration('1s')", `duration("soon")`},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			_, err := translate(t, tt.expr)
			var ue *spark.UnsupportedError
			if !errors.As(err, &ue) || ue.Construct != tt.construct {
				t.Errorf("TranslateCEL(%s) = %v, want an UnsupportedError for %q", tt.expr, err, tt.construct)
			}
		})
	}
}
