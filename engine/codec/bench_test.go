package codec_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/codec"
	"github.com/lockstep-dev/lockstep/engine/internal/box"
)

// benchCols and benchRecord are the kafka→kafka benchmark's records
// (engine/kafka/bench_test.go): {"id":"o-000000042","amount":10.5,"sent":<unix ns>}.
var benchCols = v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "amount", Type: v1.TypeDouble}, {Name: "sent", Type: v1.TypeLong}}

func benchRecord(i int) []byte {
	return fmt.Appendf(nil, `{"id":"o-%09d","amount":%g,"sent":%d}`, i, float64(i%1000)/4, 1767607200123456789+int64(i))
}

// BenchmarkDecodeJSON decodes JSON records: a file of them (Decode), and one
// at a time into a row the caller reuses (DecodeJSON, as the Kafka source
// does).
func BenchmarkDecodeJSON(b *testing.B) {
	const n = 1000
	var file []byte
	for i := range n {
		file = append(append(file, benchRecord(i)...), '\n')
	}
	d := codec.NewDecoder(benchCols)
	b.Run("file", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if rows := d.Decode(v1.FormatJSON, file, func(m codec.Malformed) { b.Fatal(m) }); len(rows) != n {
				b.Fatalf("%d rows, want %d", len(rows), n)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
	})
	b.Run("record", func(b *testing.B) {
		records := make([][]byte, n)
		for i := range records {
			records[i] = benchRecord(i)
		}
		row := make(engine.Row, len(benchCols))
		var vals box.Slab
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := d.DecodeJSON(records[i%n], row, &vals); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/record")
	})
}

// BenchmarkEncodeJSON encodes rows as the Kafka sink does in the kafka→kafka
// benchmark: the record's columns and the source's metadata columns.
func BenchmarkEncodeJSON(b *testing.B) {
	cols := append(slices.Clone(benchCols),
		v1.Column{Name: "_key", Type: v1.TypeString}, v1.Column{Name: "_topic", Type: v1.TypeString},
		v1.Column{Name: "_partition", Type: v1.TypeLong}, v1.Column{Name: "_offset", Type: v1.TypeLong},
		v1.Column{Name: "_timestamp", Type: v1.TypeTimestamp})
	const n = 4096
	at := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	rows := make([]engine.Row, n)
	for i := range rows {
		rows[i] = engine.Row{fmt.Sprintf("o-%09d", i), float64(i%1000) / 4, int64(1767607200123456789 + i),
			nil, "orders", int64(i % 4), int64(i), at.Add(time.Duration(i/100) * time.Millisecond)}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := codec.Encode(v1.FormatJSON, cols, rows); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
}
