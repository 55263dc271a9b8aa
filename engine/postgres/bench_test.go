package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/postgres"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// benchColumns are an update aggregation's output, keyed by (customer,
// window_start).
var (
	benchColumns = v1.Columns{
		{Name: "customer", Type: v1.TypeString}, {Name: "window_start", Type: v1.TypeTimestamp},
		{Name: "orders", Type: v1.TypeLong}, {Name: "revenue", Type: v1.TypeDouble}, {Name: "big", Type: v1.TypeBoolean},
	}
	benchKeys = []string{"customer", "window_start"}
)

const benchDDL = "(customer text NOT NULL, window_start timestamp with time zone NOT NULL, orders bigint, revenue double precision, big boolean, PRIMARY KEY (customer, window_start))"

// benchRows returns batch b's n rows: in upsert mode half of them update the
// previous batch's keys and half are new; in append mode all are new.
func benchRows(b, n int, upsert bool) []engine.Row {
	first := b * n
	if upsert {
		first = b * n / 2
	}
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	rows := make([]engine.Row, n)
	for i := range rows {
		k := first + i
		rows[i] = engine.Row{fmt.Sprintf("c%08d", k), at.Add(time.Duration(k%7) * 5 * time.Minute), int64(b + 1), float64(k) * 1.5, k%3 == 0}
	}
	return rows
}

// BenchmarkSink writes one batch per iteration through the postgres sink
// (one transaction with the lockstep_batches row; COPY in append mode,
// COPY into a staging table and INSERT … ON CONFLICT DO UPDATE in update
// mode) and, in the same iteration, the same rows with a plain pgx loop into
// a table of its own: COPY in append mode; one INSERT … SELECT FROM unnest(…)
// ON CONFLICT DO UPDATE in update mode. It reports both rates and their
// ratio (sink/plain; 1 is as fast as the plain loop), which the machine's
// load affects alike.
func BenchmarkSink(b *testing.B) {
	for _, mode := range []v1.OutputMode{v1.OutputAppend, v1.OutputUpdate} {
		for _, n := range []int{1_000, 100_000} {
			b.Run(fmt.Sprintf("%s/rows=%d", mode, n), func(b *testing.B) {
				ctx := context.Background()
				dsn := testenv.Postgres(b)
				conn, err := pgx.Connect(ctx, dsn)
				if err != nil {
					b.Fatal(err)
				}
				defer conn.Close(ctx)
				var keys []string
				if mode == v1.OutputUpdate {
					keys = benchKeys
				}
				for _, t := range []string{"sink_t", "plain_t"} {
					if _, err := conn.Exec(ctx, "CREATE TABLE "+t+" "+benchDDL); err != nil {
						b.Fatal(err)
					}
				}
				sink, err := postgres.NewSink(ctx, &v1.Sink{Postgres: &v1.PostgresSink{Table: "sink_t", Connection: v1.PostgresConnection{DSNEnv: "PG_DSN"}}},
					engine.SinkEnv{QueryID: "bench", Columns: benchColumns, OutputMode: mode, Keys: keys,
						Getenv: func(string) string { return dsn }})
				if err != nil {
					b.Fatal(err)
				}
				defer sink.(*postgres.Sink).Close()
				upsert := mode == v1.OutputUpdate
				var sinkTime, plainTime time.Duration
				var batches int
				for b.Loop() {
					rows := benchRows(batches, n, upsert)
					began := time.Now()
					if err := sink.Write(ctx, &engine.Batch{QueryID: "bench", ID: int64(batches), Columns: benchColumns, Rows: rows}); err != nil {
						b.Fatal(err)
					}
					sinkTime += time.Since(began)
					began = time.Now()
					if err := plainWrite(ctx, conn, rows, upsert); err != nil {
						b.Fatal(err)
					}
					plainTime += time.Since(began)
					batches++
				}
				total := float64(batches * n)
				b.ReportMetric(total/sinkTime.Seconds(), "sink-rows/s")
				b.ReportMetric(total/plainTime.Seconds(), "plain-rows/s")
				b.ReportMetric(plainTime.Seconds()/sinkTime.Seconds(), "sink/plain")
			})
		}
	}
}

// plainWrite is what a program without the sink would write: a COPY, or one
// upsert statement over arrays.
func plainWrite(ctx context.Context, conn *pgx.Conn, rows []engine.Row, upsert bool) error {
	if !upsert {
		src := make([][]any, len(rows))
		for i, r := range rows {
			src[i] = r
		}
		_, err := conn.CopyFrom(ctx, pgx.Identifier{"plain_t"}, benchColumns.Names(), pgx.CopyFromRows(src))
		return err
	}
	customer, at := make([]string, len(rows)), make([]time.Time, len(rows))
	orders, revenue, big := make([]int64, len(rows)), make([]float64, len(rows)), make([]bool, len(rows))
	for i, r := range rows {
		customer[i], at[i], orders[i], revenue[i], big[i] = r[0].(string), r[1].(time.Time), r[2].(int64), r[3].(float64), r[4].(bool)
	}
	_, err := conn.Exec(ctx, `INSERT INTO plain_t (customer, window_start, orders, revenue, big)
		SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::bigint[], $4::double precision[], $5::boolean[])
		ON CONFLICT (customer, window_start) DO UPDATE SET orders = EXCLUDED.orders, revenue = EXCLUDED.revenue, big = EXCLUDED.big`,
		customer, at, orders, revenue, big)
	return err
}
