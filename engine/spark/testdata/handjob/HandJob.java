// The queries of BenchmarkSparkFiles (engine/spark/bench_test.go) written by hand as a team that
// runs Spark itself would: Spark's own API, file source and file sink, nothing of Lockstep. The
// benchmark runs each beside the same query on Lockstep's spark runtime, over the same files, one
// file a batch, with the same settings:
//
//	HandJob SHAPE MASTER PARTITIONS INPUT OUTPUT CHECKPOINT [STATIC]
//
// INPUT holds the Nexmark bids in Parquet files. SHAPE is one of
//
//	filter     price > 1000, then auction, bidder, price * 0.908 AS euro, dateTime
//	aggregate  a 5 s watermark on dateTime, then per 10 s tumbling window and auction:
//	           count(*) AS bids, max(price) AS maxPrice, in append mode
//	join       an inner join with the Nexmark auctions in the Parquet files of STATIC
//	           (auction = id): auction, bidder, price, dateTime, seller, category
//
// It processes what is in INPUT (availableNow) and stops.
import java.util.concurrent.TimeUnit;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.count;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.max;
import static org.apache.spark.sql.functions.window;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.streaming.Trigger;

public class HandJob {
    static final String BIDS = "auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, dateTime TIMESTAMP, extra STRING";
    static final String AUCTIONS = "id BIGINT, itemName STRING, description STRING, initialBid BIGINT, reserve BIGINT, "
        + "dateTime TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra STRING";

    public static void main(String[] args) throws Exception {
        String shape = args[0], master = args[1], partitions = args[2];
        String input = args[3], output = args[4], checkpoint = args[5];
        SparkSession spark = SparkSession.builder().master(master).appName("hand-" + shape)
            .config("spark.sql.shuffle.partitions", partitions)
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.ui.enabled", "false")
            .getOrCreate();
        Dataset<Row> bids = spark.readStream().schema(BIDS).option("maxFilesPerTrigger", 1).parquet(input);
        Dataset<Row> out = switch (shape) {
            case "filter" -> bids.filter("price > 1000")
                .selectExpr("auction", "bidder", "CAST(price AS DOUBLE) * 0.908 AS euro", "dateTime");
            case "aggregate" -> bids.withWatermark("dateTime", "5 seconds")
                .groupBy(window(col("dateTime"), "10 seconds"), col("auction"))
                .agg(count(lit(1)).as("bids"), max("price").as("maxPrice"))
                .select(col("window.start").as("window_start"), col("window.end").as("window_end"),
                    col("auction"), col("bids"), col("maxPrice"));
            case "join" -> {
                Dataset<Row> auctions = spark.read().schema(AUCTIONS).parquet(args[6]);
                yield bids.join(auctions, bids.col("auction").equalTo(auctions.col("id")))
                    .select(bids.col("auction"), bids.col("bidder"), bids.col("price"), bids.col("dateTime"),
                        auctions.col("seller"), auctions.col("category"));
            }
            default -> throw new IllegalArgumentException("shape " + shape + ": want filter, aggregate or join");
        };
        out.writeStream().format("parquet").outputMode("append")
            .option("checkpointLocation", checkpoint)
            .trigger(Trigger.AvailableNow())
            .start(output).awaitTermination(TimeUnit.MINUTES.toMillis(30));
        spark.stop();
    }
}
