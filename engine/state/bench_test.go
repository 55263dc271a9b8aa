package state_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine/state"
)

// countSumValue is the state value of count+sum: what the aggregate writes.
func countSumValue(n int64, sum float64) []byte {
	b := binary.AppendUvarint(nil, uint64(n))
	return binary.BigEndian.AppendUint64(append(b, 1), math.Float64bits(sum))
}

func benchKey(i int) string { return fmt.Sprintf("key-%07d", i) }

// fill puts keys [from, to) into a loaded store.
func fill(b *testing.B, st *state.Store, keys []string) {
	err := st.Update(func(p *state.Partition) error {
		for _, k := range keys {
			if state.PartitionOf([]byte(k), st.Partitions()) == p.ID() {
				p.Put(k, countSumValue(int64(len(k)), 1.5))
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

func benchStores() []struct {
	name string
	open func(testing.TB) checkpoint.Store
} {
	return []struct {
		name string
		open func(testing.TB) checkpoint.Store
	}{{"dir", dir}, {"s3", s3Store}}
}

// BenchmarkCommit measures the time to commit a batch that touched 10k keys
// of a 1M-key state (8 partitions), on a local folder and on loopback S3,
// with and without background snapshots (a real run has them); and the
// sizes of the deltas and snapshots written.
func BenchmarkCommit(b *testing.B) {
	const keys, touched = 1_000_000, 10_000
	names := make([]string, keys)
	for i := range names {
		names[i] = benchKey(i)
	}
	for _, s := range benchStores() {
		for _, snapshots := range []bool{true, false} {
			b.Run(fmt.Sprintf("store=%s/snapshots=%t", s.name, snapshots), func(b *testing.B) {
				benchCommit(b, s.open(b), names, touched, snapshots)
			})
		}
	}
}

func benchCommit(b *testing.B, cs checkpoint.Store, names []string, touched int, snapshots bool) {
	keys := len(names)
	every := 0 // the default
	if !snapshots {
		every = 1 << 30
	}
	st, err := state.Open(b.Context(), cs, meta("agg"), state.Options{Partitions: 8, SnapshotEvery: every})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if err := st.Load(b.Context(), 0); err != nil {
		b.Fatal(err)
	}
	fill(b, st, names)
	if _, err := st.Commit(b.Context()); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	batch := make([]string, touched)
	var deltaBytes int64
	var commits []time.Duration
	for b.Loop() {
		for i := range batch {
			batch[i] = names[rng.IntN(keys)]
		}
		fill(b, st, batch)
		began := time.Now()
		cm, err := st.Commit(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		commits = append(commits, time.Since(began))
		deltaBytes += cm.Bytes
	}
	st.Close() // waits for the snapshots
	// Percentiles: on a shared machine the mean is mostly other processes.
	slices.Sort(commits)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(commits[len(commits)/2]), "p50-ms/commit")
	b.ReportMetric(ms(commits[len(commits)*9/10]), "p90-ms/commit")
	b.ReportMetric(ms(commits[0]), "min-ms/commit")
	b.ReportMetric(float64(deltaBytes)/float64(b.N), "delta-B/commit")
	b.ReportMetric(float64(deltaBytes)/float64(b.N)/float64(touched), "delta-B/key")
	infos, err := cs.List(b.Context(), "state/agg/")
	if err != nil {
		b.Fatal(err)
	}
	var snapBytes int64
	var snaps int
	for _, in := range infos {
		if strings.HasSuffix(in.Key, ".snapshot") {
			snapBytes += in.Size
			snaps++
		}
	}
	if snaps > 0 {
		// Each partition holds about keys/8 keys.
		b.ReportMetric(float64(snapBytes)/float64(snaps)/float64(keys/8), "snapshot-B/key")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkRecovery measures loading 1M keys of state (8 partitions, a
// snapshot and deltas each) into a new store, from a local folder and from
// loopback S3.
func BenchmarkRecovery(b *testing.B) {
	const keys = 1_000_000
	names := make([]string, keys)
	for i := range names {
		names[i] = benchKey(i)
	}
	for _, s := range benchStores() {
		b.Run("store="+s.name, func(b *testing.B) {
			cs := s.open(b)
			st, err := state.Open(b.Context(), cs, meta("agg"), state.Options{Partitions: 8, SnapshotEvery: 4})
			if err != nil {
				b.Fatal(err)
			}
			if err := st.Load(b.Context(), 0); err != nil {
				b.Fatal(err)
			}
			fill(b, st, names)
			rng := rand.New(rand.NewPCG(5, 6))
			for range 12 { // snapshots of every partition, then a few deltas
				if _, err := st.Commit(b.Context()); err != nil {
					b.Fatal(err)
				}
				batch := make([]string, 10_000)
				for i := range batch {
					batch[i] = names[rng.IntN(keys)]
				}
				fill(b, st, batch)
			}
			cm, err := st.Commit(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			st.Close()
			cpu := cpuTime()
			for b.Loop() {
				re, err := state.Open(b.Context(), cs, meta("agg"), state.Options{Partitions: 8})
				if err != nil {
					b.Fatal(err)
				}
				if err := re.Load(b.Context(), cm.Version); err != nil {
					b.Fatal(err)
				}
				if re.Rows() != keys {
					b.Fatalf("recovered %d keys, want %d", re.Rows(), keys)
				}
				re.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/recovery")
			b.ReportMetric(float64((cpuTime()-cpu).Milliseconds())/float64(b.N), "cpu-ms/recovery")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// cpuTime returns the process's user and system CPU time, GC included: what
// a shared machine cannot distort.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
