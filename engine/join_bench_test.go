package engine

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
)

// BenchmarkStaticJoin hash-joins batches of 100k orders with a static side of 1M customers,
// left outer (one order in ten has no customer), as the engine does, and, over the same rows
// in the same iteration, with a hand-written Go hash join (map[string]int32 plus an output
// slab: the least a join producing the same rows can do). It reports each one's rows per
// CPU-second of the process (user + system, garbage collection included; run with -cpu 1 for
// one core) and their ratio; and the time to build the engine's hash table per static row.
//
//	go test -run '^$' -bench StaticJoin -benchtime 20x -cpu 1 ./engine/
func BenchmarkStaticJoin(b *testing.B) {
	const (
		static = 1_000_000
		batch  = 100_000
	)
	spec := querytest.Make("bench", "default").
		FilesSource("orders", "/in", v1.FormatJSON,
			querytest.Col("order_id", v1.TypeString), querytest.Col("customer_id", v1.TypeString), querytest.Col("amount", v1.TypeDouble)).
		Join(v1.Join{Type: v1.JoinLeftOuter, Keys: querytest.Keys("customer_id", "id"),
			Static: querytest.StaticDelta("/lake/customers", querytest.Col("id", v1.TypeString), querytest.Col("name", v1.TypeString), querytest.Col("tier", v1.TypeLong)),
			Select: []v1.JoinColumn{{Side: v1.SideLeft, Column: "order_id"}, {Side: v1.SideLeft, Column: "amount"}, {Side: v1.SideRight, Column: "name"}, {Side: v1.SideRight, Column: "tier"}}}).
		ConsoleSink().Spec()
	js := benchSteps(b, spec)[0].(*staticJoinStep)
	customers := make([]Row, static)
	for i := range customers {
		customers[i] = Row{fmt.Sprintf("c%07d", i), fmt.Sprintf("customer %d", i), int64(i % 5)}
	}
	heap0 := heapInUse()
	began := cpuNow()
	js.index = newHashIndex(customers, js.rightKeys, js.keyType)
	build := cpuNow() - began
	indexBytes := heapInUse() - heap0
	orders := make([]Row, batch)
	for i := range orders {
		c := fmt.Sprintf("c%07d", (i*7919)%static)
		if i%10 == 9 {
			c = "missing"
		}
		orders[i] = Row{fmt.Sprintf("o%07d", i), c, float64(i) / 100}
	}

	// The hand-written join: the same map from key to the first row and the same chains,
	// then the same output rows, without the engine's generality (one string key, fixed
	// columns).
	plainIndex := make(map[string]int32, static)
	plainNext := make([]int32, static)
	for i := static - 1; i >= 0; i-- {
		plainNext[i] = -1
		k := customers[i][0].(string)
		if h, ok := plainIndex[k]; ok {
			plainNext[i] = h
		}
		plainIndex[k] = int32(i)
	}
	plain := func(rows []Row) []Row {
		out := make([]Row, 0, len(rows))
		slab := make([]any, 4*len(rows))
		for _, l := range rows {
			h, ok := plainIndex[l[1].(string)]
			if !ok {
				row := Row(slab[:4:4])
				slab = slab[4:]
				row[0], row[1] = l[0], l[2]
				out = append(out, row)
				continue
			}
			for ; h >= 0; h = plainNext[h] {
				if len(slab) < 4 {
					slab = make([]any, 4*len(rows))
				}
				row := Row(slab[:4:4])
				slab = slab[4:]
				r := customers[h]
				row[0], row[1], row[2], row[3] = l[0], l[2], r[1], r[2]
				out = append(out, row)
			}
		}
		return out
	}

	var engineCPU, plainCPU time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := cpuNow()
		out := js.join(orders)
		t1 := cpuNow()
		ref := plain(orders)
		t2 := cpuNow()
		if len(out) != batch || len(ref) != batch || out[9][2] != nil || out[0][2] != ref[0][2] {
			b.Fatalf("joined %d and %d rows, want %d each", len(out), len(ref), batch)
		}
		engineCPU += t1 - t0
		plainCPU += t2 - t1
	}
	rows := float64(b.N * batch)
	b.ReportMetric(rows/engineCPU.Seconds(), "rows/cpu-s")
	b.ReportMetric(rows/plainCPU.Seconds(), "plain-rows/cpu-s")
	b.ReportMetric(plainCPU.Seconds()/engineCPU.Seconds(), "ratio")
	b.ReportMetric(float64(build.Nanoseconds())/static, "build-cpu-ns/row")
	b.ReportMetric(float64(indexBytes)/static, "index-B/row")
}

// heapInUse returns the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// cpuNow returns the process's user and system CPU time.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
