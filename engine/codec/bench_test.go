package codec_test

import (
	"fmt"
	"testing"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/codec"
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
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := d.DecodeJSON(records[i%n], row); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/record")
	})
}
