package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/internal/box"
)

// referenceRecord is DecodeJSON written with encoding/json: the behaviour
// the scanner must match.
func (d *Decoder) referenceRecord(text []byte) (engine.Row, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("null")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("text after the JSON object")
	}
	row := make(engine.Row, len(d.cols))
	for i, c := range d.cols {
		v, ok := m[c.Name]
		if !ok || v == nil {
			continue
		}
		var err error
		switch c.Type {
		case v1.TypeString:
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("type")
			}
			row[i] = s
		case v1.TypeLong:
			n, ok := v.(json.Number)
			if !ok {
				return nil, fmt.Errorf("type")
			}
			row[i], err = strconv.ParseInt(string(n), 10, 64)
		case v1.TypeDouble:
			n, ok := v.(json.Number)
			if !ok {
				return nil, fmt.Errorf("type")
			}
			row[i], err = strconv.ParseFloat(string(n), 64)
		case v1.TypeBoolean:
			b, ok := v.(bool)
			if !ok {
				return nil, fmt.Errorf("type")
			}
			row[i] = b
		case v1.TypeTimestamp:
			switch v := v.(type) {
			case string:
				row[i], err = parseTimestamp(v)
			case json.Number:
				var ms int64
				ms, err = strconv.ParseInt(string(v), 10, 64)
				row[i] = time.UnixMilli(ms).UTC()
			default:
				err = fmt.Errorf("type")
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return row, nil
}

var fuzzCols = v1.Columns{
	{Name: "s", Type: v1.TypeString}, {Name: "l", Type: v1.TypeLong}, {Name: "d", Type: v1.TypeDouble},
	{Name: "b", Type: v1.TypeBoolean}, {Name: "t", Type: v1.TypeTimestamp},
}

// FuzzJSONRecord checks the scanner against encoding/json: both accept the
// same records and read the same values, into a row that held others.
func FuzzJSONRecord(f *testing.F) {
	for _, seed := range []string{
		`{"s":"a","l":1,"d":2.5,"b":true,"t":"2026-01-05T10:00:00Z"}`,
		`{"s":"esc \" \\ \/ \b\f\n\r\t \u00e9 \ud83d\ude00 \ud800x","x":{"y":[1,{"z":null}]}}`,
		`{"l":-0,"d":1e10,"t":1767607200123,"b":false,"s":null}`,
		` { "s" : "x" , "s" : "y" } `,
		`{"l":1.5}`, `{"d":"x"}`, `{"s":1}`, `[1]`, `null`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`,
		`{"a":-}`, `{"a":tru}`, `{"a":"\x01"}`, `{"a":"\q"}`, `{"a":1}x`, `{"a":1,}`, `{,}`, `{"a" 1}`,
		"{\"s\":\"\xff\xfe\"}", `{"s":"\ud800"}`, `{"s":"\udc00\ud800"}`, `{"s":1,"s":"x"}`, `{"s":"x","s":1}`, `{}`, ``, `{"t":"yesterday"}`,
	} {
		f.Add([]byte(seed))
	}
	d := NewDecoder(fuzzCols)
	var vals box.Slab // values boxed as the Kafka source boxes them
	f.Fuzz(func(t *testing.T, text []byte) {
		want, wantErr := d.referenceRecord(text)
		// A reused row: what a record leaves out must not show through.
		got := engine.Row{"stale", int64(1), 2.0, true, time.Time{}, "beyond"}
		err := d.DecodeJSON(text, got, &vals)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("DecodeJSON(%q) error = %v, encoding/json's = %v", text, err, wantErr)
		}
		if err != nil {
			want = make(engine.Row, len(fuzzCols)) // all nil
		}
		if diff := cmp.Diff(append(want, "beyond"), got); diff != "" {
			t.Fatalf("DecodeJSON(%q) (-encoding/json +scanner):\n%s", text, diff)
		}
	})
}

func TestParseInt(t *testing.T) {
	for _, n := range []string{
		"0", "-0", "7", "-42", "1767607200123456789", "9223372036854775807", "-9223372036854775808",
		"9223372036854775808", "-9223372036854775809", "9999999999999999999", "-9999999999999999999",
		"10000000000000000000", "1.5", "1e3", "-1E+2", "-", "",
	} {
		got, err := parseInt([]byte(n))
		want, wantErr := strconv.ParseInt(n, 10, 64)
		if got != want || (err != nil) != (wantErr != nil) {
			t.Errorf("parseInt(%q) = %d, %v, want %d, %v", n, got, err, want, wantErr)
		}
	}
}
