package codec_test

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/codec"
)

var cols = v1.Columns{
	{Name: "id", Type: v1.TypeString},
	{Name: "n", Type: v1.TypeLong},
	{Name: "amount", Type: v1.TypeDouble},
	{Name: "ok", Type: v1.TypeBoolean},
	{Name: "ts", Type: v1.TypeTimestamp},
}

var ts = time.Date(2026, 1, 5, 10, 0, 0, 123456000, time.UTC)

var rows = []engine.Row{
	{"a", int64(1), 1.5, true, ts},
	{`quote " and \ and
newline, ünïcode`, int64(-7), -0.25, false, ts.Add(time.Hour)},
	{nil, nil, nil, nil, nil},
}

func decodeAll(t *testing.T, format v1.FileFormat, data []byte) ([]engine.Row, []codec.Malformed) {
	t.Helper()
	var bad []codec.Malformed
	got := codec.NewDecoder(cols).Decode(format, data, func(m codec.Malformed) { bad = append(bad, m) })
	return got, bad
}

func TestRoundTrip(t *testing.T) {
	for _, format := range []v1.FileFormat{v1.FormatJSON, v1.FormatParquet} {
		t.Run(string(format), func(t *testing.T) {
			data, err := codec.Encode(format, cols, rows)
			if err != nil {
				t.Fatal(err)
			}
			got, bad := decodeAll(t, format, data)
			if len(bad) > 0 {
				t.Fatalf("malformed: %+v", bad)
			}
			if diff := cmp.Diff(rows, got); diff != "" {
				t.Errorf("Decode(Encode(rows)) (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEncodeJSON(t *testing.T) {
	data, err := codec.Encode(v1.FormatJSON, cols[:3], []engine.Row{{"x", int64(2), math.Inf(1)}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"x","n":2,"amount":null}` + "\n"; string(data) != want {
		t.Errorf("Encode = %q, want %q", data, want)
	}
}

func TestDecodeJSONMalformed(t *testing.T) {
	in := `{"id":"a","n":1,"amount":2,"ok":true,"ts":"2026-01-05T10:00:00.123456Z"}

{"id":"b","n":"one"}
not json
{"id":"c","ts":1767607200123}
[1,2]
{"id":"d","amount":"x"}
{"id":"e"} trailing
{"id":"f","ok":1}
`
	got, bad := decodeAll(t, v1.FormatJSON, []byte(in))
	want := []engine.Row{
		{"a", int64(1), 2.0, true, ts},
		{"c", nil, nil, nil, time.UnixMilli(1767607200123).UTC()},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	var lines []int64
	for _, m := range bad {
		lines = append(lines, m.Line)
		if m.Reason == "" || m.Record == "" {
			t.Errorf("line %d: no reason or record: %+v", m.Line, m)
		}
	}
	if diff := cmp.Diff([]int64{3, 4, 6, 7, 8, 9}, lines); diff != "" {
		t.Errorf("malformed lines (-want +got):\n%s", diff)
	}
}

func TestDecodeCSV(t *testing.T) {
	in := "a,1,2.5,true,2026-01-05T10:00:00.123456Z\n" +
		"\"b, with comma\",,,,\n" +
		"c,x,1,true,1\n" +
		"d,1,2\n" +
		"e,1,1,maybe,1\n" +
		"\"f\"\"q\",2,3,false,1767607200123\r\n"
	got, bad := decodeAll(t, v1.FormatCSV, []byte(in))
	want := []engine.Row{
		{"a", int64(1), 2.5, true, ts},
		{"b, with comma", nil, nil, nil, nil},
		{`f"q`, int64(2), 3.0, false, time.UnixMilli(1767607200123).UTC()},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	var lines []int64
	for _, m := range bad {
		lines = append(lines, m.Line)
	}
	if diff := cmp.Diff([]int64{3, 4, 5}, lines); diff != "" {
		t.Errorf("malformed lines (-want +got):\n%s", diff)
	}
}

func TestDecodeParquetByName(t *testing.T) {
	// A file with other columns, in another order, and without "ok".
	other := v1.Columns{{Name: "ts", Type: v1.TypeTimestamp}, {Name: "extra", Type: v1.TypeString}, {Name: "id", Type: v1.TypeString}, {Name: "n", Type: v1.TypeLong}, {Name: "amount", Type: v1.TypeDouble}}
	data, err := codec.Encode(v1.FormatParquet, other, []engine.Row{{ts, "x", "a", int64(3), 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	got, bad := decodeAll(t, v1.FormatParquet, data)
	if len(bad) > 0 {
		t.Fatalf("malformed: %+v", bad)
	}
	if diff := cmp.Diff([]engine.Row{{"a", int64(3), 0.5, nil, ts}}, got); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

func TestDecodeParquetUnreadable(t *testing.T) {
	_, bad := decodeAll(t, v1.FormatParquet, []byte("not parquet at all"))
	if len(bad) != 1 || bad[0].Line != 0 {
		t.Fatalf("malformed = %+v, want one for the whole file", bad)
	}
	// A column of a type that cannot be read as the schema's.
	data, err := codec.Encode(v1.FormatParquet, v1.Columns{{Name: "n", Type: v1.TypeString}}, []engine.Row{{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, bad := decodeAll(t, v1.FormatParquet, data); len(bad) != 1 {
		t.Fatalf("malformed = %+v, want one", bad)
	}
}
