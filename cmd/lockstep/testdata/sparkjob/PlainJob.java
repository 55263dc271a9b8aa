// A plain Spark Structured Streaming job, written as a team that runs Spark by hand would:
// no Lockstep code, only Spark's own API. The tests run it with java's single-file source
// launcher on the Spark jars `make tools` caches, so that `lockstep checkpoint describe` and
// `lockstep plan` are tested on a checkpoint Lockstep never wrote.
//
//	java --source 17 -cp 'libs/*' PlainJob.java KIND INPUT CHECKPOINT [KEY=VALUE...]
//
// Each KEY=VALUE after the checkpoint is a Spark setting when KEY starts with "spark.", else
// an option of the job's files sources (maxFilesPerTrigger=1: one file a batch).
// KIND is the query: dedup-agg (JSON orders → watermark → dropDuplicates(order_id) → count,
// sum, max per country and 1-minute window), or stream-join (orders ⋈ payments by order_id
// within a time bound). Each run processes what is in INPUT (availableNow) and stops.
// dedup-agg-named is dedup-agg with its source named "orders" (DataStreamReader.name, Spark's
// source evolution): the checkpoint the spark runtime can take over. sum-count is JSON orders →
// watermark → sum(amount), count() per country and 2-minute window, no dedup: the buffer
// (sum double, count long) that avg(amount) has too.
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.streaming.DataStreamReader;
import org.apache.spark.sql.streaming.Trigger;
import org.apache.spark.sql.types.StructType;

import static org.apache.spark.sql.functions.*;

public class PlainJob {
    public static void main(String[] args) throws Exception {
        String kind = args[0], input = args[1], checkpoint = args[2];
        boolean named = kind.endsWith("-named");
        SparkSession.Builder builder = SparkSession.builder().master("local[2]").appName("plain-" + kind)
            .config("spark.sql.shuffle.partitions", "3")
            .config("spark.sql.streaming.queryEvolution.enableSourceEvolution", String.valueOf(named))
            .config("spark.ui.enabled", "false");
        Map<String, String> sourceOptions = new HashMap<>();
        for (int i = 3; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            if (kv[0].startsWith("spark.")) {
                builder = builder.config(kv[0], kv[1]);
            } else {
                sourceOptions.put(kv[0], kv[1]);
            }
        }
        SparkSession spark = builder.getOrCreate();
        spark.sparkContext().setLogLevel("WARN");
        StructType orders = new StructType().add("order_id", "string").add("country", "string")
            .add("amount", "double").add("ts", "timestamp");
        Dataset<Row> out;
        switch (kind) {
            case "dedup-agg", "dedup-agg-named": {
                DataStreamReader reader = spark.readStream().options(sourceOptions).schema(orders);
                if (named) {
                    reader = reader.name("orders");
                }
                Dataset<Row> in = reader.json(input + "/orders");
                out = in.withWatermark("ts", "10 seconds")
                    .dropDuplicates("order_id")
                    .groupBy(col("country"), window(col("ts"), "1 minute"))
                    .agg(count(lit(1)).as("orders"), sum("amount").as("revenue"), max("amount").as("top"));
                break;
            }
            case "sum-count": {
                Dataset<Row> in = spark.readStream().options(sourceOptions).schema(orders).json(input + "/orders");
                out = in.withWatermark("ts", "10 seconds")
                    .groupBy(col("country"), window(col("ts"), "2 minutes"))
                    .agg(sum("amount").as("revenue"), count(lit(1)).as("orders"));
                break;
            }
            case "stream-join": {
                StructType payments = new StructType().add("pay_id", "string").add("paid_ts", "timestamp");
                Dataset<Row> o = spark.readStream().options(sourceOptions).schema(orders).json(input + "/orders").withWatermark("ts", "10 seconds");
                Dataset<Row> p = spark.readStream().options(sourceOptions).schema(payments).json(input + "/payments").withWatermark("paid_ts", "10 seconds");
                out = o.join(p, expr("order_id = pay_id AND paid_ts BETWEEN ts AND ts + interval 1 minute"));
                break;
            }
            default:
                throw new IllegalArgumentException("unknown kind " + kind);
        }
        out.writeStream().format("noop").outputMode("append")
            .option("checkpointLocation", checkpoint)
            .trigger(Trigger.AvailableNow())
            .start().awaitTermination(TimeUnit.MINUTES.toMillis(5));
        spark.stop();
    }
}
