package kafka

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine/codec"
	"github.com/lockstep-dev/lockstep/engine/internal/box"
)

// flatTestSchema has every shape the flat plan covers: primitives, a nullable nested record
// holding a nested record, enums, decimals in bytes and in fixed (read as doubles and as exact
// strings), a date and timestamps, and fields no column reads (skipped).
const flatTestSchema = `{"type":"record","name":"Order","fields":[
 {"name":"id","type":"string"},
 {"name":"qty","type":["null","int"]},
 {"name":"customer","type":["null",{"type":"record","name":"Customer","fields":[
   {"name":"country","type":"string"},
   {"name":"tier","type":{"type":"enum","name":"Tier","symbols":["FREE","PRO","ENTERPRISE"]}},
   {"name":"address","type":{"type":"record","name":"Address","fields":[
     {"name":"city","type":["null","string"]},{"name":"zip","type":"int"}]}}]}]},
 {"name":"total","type":{"type":"bytes","logicalType":"decimal","precision":20,"scale":2}},
 {"name":"exact","type":["null",{"type":"bytes","logicalType":"decimal","precision":38,"scale":4}]},
 {"name":"fee","type":{"type":"fixed","name":"Fee","size":12,"logicalType":"decimal","precision":28,"scale":3}},
 {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID","SHIPPED"]}},
 {"name":"skipped","type":{"type":"record","name":"Skipped","fields":[{"name":"x","type":"double"},{"name":"e","type":"Status"}]}},
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"at","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"ok","type":"boolean"},
 {"name":"ratio","type":"float"}]}`

var flatTestColumns = v1.Columns{
	{Name: "id", Type: v1.TypeString}, {Name: "qty", Type: v1.TypeDouble},
	{Name: "customer__country", Type: v1.TypeString}, {Name: "customer__tier", Type: v1.TypeString},
	{Name: "customer__address__city", Type: v1.TypeString}, {Name: "customer__address__zip", Type: v1.TypeLong},
	{Name: "total", Type: v1.TypeDouble}, {Name: "exact", Type: v1.TypeString}, {Name: "fee", Type: v1.TypeDouble},
	{Name: "status", Type: v1.TypeString}, {Name: "day", Type: v1.TypeTimestamp}, {Name: "at", Type: v1.TypeTimestamp},
	{Name: "ok", Type: v1.TypeBoolean}, {Name: "ratio", Type: v1.TypeDouble},
}

// TestFlatPlanMatchesTheGenericReader decodes random records of flatTestSchema with the flat
// plan and with hamba's generic reader: every column must come out the same, decimals of any
// size (past 53 bits too) included.
func TestFlatPlanMatchesTheGenericReader(t *testing.T) {
	p := newAvroPlan(sr.Schema{Schema: flatTestSchema, Type: sr.TypeAvro}, flatTestColumns)
	if p.err != nil {
		t.Fatal(p.err)
	}
	if p.flat == nil {
		t.Fatal("the flat plan does not cover nested records, enums and decimals")
	}
	d := newAvroDecoder(nil, flatTestColumns)
	rng := rand.New(rand.NewPCG(1, 2))
	dec := func(bits int) *big.Rat {
		n := new(big.Int)
		for range (bits + 63) / 64 {
			n.Lsh(n, 64).Or(n, new(big.Int).SetUint64(rng.Uint64()))
		}
		n.Rsh(n, uint((bits+63)/64*64-bits))
		if rng.IntN(2) == 0 {
			n.Neg(n)
		}
		return new(big.Rat).SetFrac(n, big.NewInt(1))
	}
	scaled := func(bits, scale int) *big.Rat {
		return new(big.Rat).Quo(dec(bits), new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
	}
	for i := range 2000 {
		rec := map[string]any{
			"id": "o-" + string(rune('a'+i%26)), "qty": nil,
			"customer": nil,
			"total":    scaled(1+rng.IntN(63), 2),
			"exact":    nil,
			"fee":      scaled(1+rng.IntN(90), 3),
			"status":   []string{"NEW", "PAID", "SHIPPED"}[rng.IntN(3)],
			"skipped":  map[string]any{"x": rng.Float64(), "e": "PAID"},
			"day":      time.Date(2026, 1, 1+rng.IntN(300), 0, 0, 0, 0, time.UTC),
			"at":       time.UnixMicro(rng.Int64N(1 << 52)).UTC(),
			"ok":       rng.IntN(2) == 0,
			"ratio":    rng.Float32(),
		}
		if rng.IntN(3) > 0 {
			rec["qty"] = map[string]any{"int": rng.Int32()}
		}
		if rng.IntN(3) > 0 {
			var city any
			if rng.IntN(2) == 0 {
				city = map[string]any{"string": "Lyon"}
			}
			rec["customer"] = map[string]any{"Customer": map[string]any{"country": "FR", "tier": "PRO",
				"address": map[string]any{"city": city, "zip": rng.Int32N(99999)}}}
		}
		if rng.IntN(3) > 0 {
			rec["exact"] = map[string]any{"bytes.decimal": scaled(1+rng.IntN(120), 4)}
		}
		b, err := avro.Marshal(p.schema, rec)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		var vals box.Slab
		flat, generic := make([]any, len(flatTestColumns)), make([]any, len(flatTestColumns))
		if err := decodeFlat(p.flat, b, flat, &vals); err != nil {
			t.Fatalf("record %d: flat: %v", i, err)
		}
		if err := d.decodeGeneric(p, 1, b, generic, &vals); err != nil {
			t.Fatalf("record %d: generic: %v", i, err)
		}
		if diff := cmp.Diff(generic, flat); diff != "" {
			t.Fatalf("record %d %v: flat plan differs from the generic reader (-generic +flat):\n%s", i, rec, diff)
		}
	}
}

// TestFlatPlanLeavesTheRest: schemas the flat plan does not cover keep the generic path.
func TestFlatPlanLeavesTheRest(t *testing.T) {
	for name, schema := range map[string]string{
		"array":        `{"type":"record","name":"R","fields":[{"name":"id","type":"string"},{"name":"xs","type":{"type":"array","items":"long"}}]}`,
		"map":          `{"type":"record","name":"R","fields":[{"name":"id","type":"string"},{"name":"m","type":{"type":"map","values":"long"}}]}`,
		"wide union":   `{"type":"record","name":"R","fields":[{"name":"id","type":"string"},{"name":"u","type":["null","string","long"]}]}`,
		"plain fixed":  `{"type":"record","name":"R","fields":[{"name":"id","type":"string"},{"name":"h","type":{"type":"fixed","name":"H","size":4}}]}`,
		"array nested": `{"type":"record","name":"R","fields":[{"name":"id","type":"string"},{"name":"c","type":{"type":"record","name":"C","fields":[{"name":"xs","type":{"type":"array","items":"int"}}]}}]}`,
	} {
		p := newAvroPlan(sr.Schema{Schema: schema, Type: sr.TypeAvro}, v1.Columns{{Name: "id", Type: v1.TypeString}})
		if p.err != nil {
			t.Fatalf("%s: %v", name, p.err)
		}
		if p.flat != nil {
			t.Errorf("%s: a flat plan, want the generic path", name)
		}
	}
}

// BenchmarkAvroDecode decodes the same rows three ways: records of flatTestSchema (nested
// records, enums, decimals) with the flat plan and with hamba's generic reader, and the same
// columns as JSON with the engine's JSON decoder. It reports rows/s for each and x-json, the
// flat plan's rate over JSON's for the same rows (issue 38: nested Avro decoded at half JSON's
// rate on the generic path).
//
//	go test ./engine/kafka -run '^$' -bench AvroDecode
func BenchmarkAvroDecode(b *testing.B) {
	p := newAvroPlan(sr.Schema{Schema: flatTestSchema, Type: sr.TypeAvro}, flatTestColumns)
	if p.err != nil || p.flat == nil {
		b.Fatalf("no flat plan: %v", p.err)
	}
	d := newAvroDecoder(nil, flatTestColumns)
	const n = 1000
	records := make([][]byte, n)
	jsons := make([][]byte, n)
	for i := range n {
		rec := map[string]any{
			"id": fmt.Sprintf("o-%09d", i), "qty": map[string]any{"int": int32(i % 7)},
			"customer": map[string]any{"Customer": map[string]any{"country": "FR", "tier": "PRO",
				"address": map[string]any{"city": map[string]any{"string": "Lyon"}, "zip": int32(69000 + i%100)}}},
			"total": big.NewRat(int64(i*37%100000), 100), "exact": map[string]any{"bytes.decimal": big.NewRat(int64(i), 10000)},
			"fee": big.NewRat(int64(i%999), 1000), "status": "PAID",
			"skipped": map[string]any{"x": 0.5, "e": "NEW"},
			"day":     time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), "at": time.UnixMicro(int64(i) * 1000).UTC(),
			"ok": i%2 == 0, "ratio": float32(0.25),
		}
		var err error
		if records[i], err = avro.Marshal(p.schema, rec); err != nil {
			b.Fatal(err)
		}
		jsons[i] = fmt.Appendf(nil, `{"id":"o-%09d","qty":%d,"customer__country":"FR","customer__tier":"PRO","customer__address__city":"Lyon",`+
			`"customer__address__zip":%d,"total":%s,"exact":"%s","fee":%s,"status":"PAID","day":"2026-01-01T00:00:00Z",`+
			`"at":"%s","ok":%t,"ratio":0.25}`, i, i%7, 69000+i%100, big.NewRat(int64(i*37%100000), 100).FloatString(2),
			big.NewRat(int64(i), 10000).FloatString(4), big.NewRat(int64(i%999), 1000).FloatString(3),
			time.UnixMicro(int64(i)*1000).UTC().Format(time.RFC3339Nano), i%2 == 0)
	}
	jd := codec.NewDecoder(flatTestColumns)
	rates := map[string]float64{}
	for _, tc := range []struct {
		name   string
		decode func(i int, row []any, vals *box.Slab) error
	}{
		{"flat", func(i int, row []any, vals *box.Slab) error { return decodeFlat(p.flat, records[i], row, vals) }},
		{"generic", func(i int, row []any, vals *box.Slab) error { return d.decodeGeneric(p, 1, records[i], row, vals) }},
		{"json", func(i int, row []any, vals *box.Slab) error { return jd.DecodeJSON(jsons[i], row, vals) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			row := make([]any, len(flatTestColumns))
			var vals box.Slab
			b.ReportAllocs()
			b.ResetTimer()
			for k := range b.N {
				clear(row)
				if err := tc.decode(k%n, row, &vals); err != nil {
					b.Fatal(err)
				}
			}
			rate := float64(b.N) / b.Elapsed().Seconds()
			rates[tc.name] = rate
			b.ReportMetric(rate, "rows/s")
			if j := rates["json"]; tc.name == "json" && j > 0 && rates["flat"] > 0 {
				b.ReportMetric(rates["flat"]/j, "x-json")
			}
		})
	}
}
