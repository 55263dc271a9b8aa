// A stateless filter and projection from Parquet files to Parquet files, written by hand as a
// team that runs Spark itself would: Spark's own API, file source and file sink, nothing of
// Lockstep. BenchmarkSparkFiles (engine/spark/bench_test.go) runs it beside the same query on
// Lockstep's spark runtime, over the same files, one file a batch, with the same settings:
//
//	HandFilterJob MASTER PARTITIONS SCHEMA INPUT FILTER PROJECTION OUTPUT CHECKPOINT
//
// SCHEMA is the input's schema in Spark's DDL form, FILTER a Spark SQL condition, PROJECTION
// Spark SQL expressions with AS aliases, separated by ";". It processes what is in INPUT
// (availableNow) and stops.
import java.util.concurrent.TimeUnit;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.streaming.Trigger;

public class HandFilterJob {
    public static void main(String[] args) throws Exception {
        String master = args[0], partitions = args[1], schema = args[2], input = args[3];
        String filter = args[4], projection = args[5], output = args[6], checkpoint = args[7];
        SparkSession spark = SparkSession.builder().master(master).appName("hand-filter")
            .config("spark.sql.shuffle.partitions", partitions)
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.ui.enabled", "false")
            .getOrCreate();
        Dataset<Row> in = spark.readStream().schema(schema).option("maxFilesPerTrigger", 1).parquet(input);
        in.filter(filter).selectExpr(projection.split(";"))
            .writeStream().format("parquet").outputMode("append")
            .option("checkpointLocation", checkpoint)
            .trigger(Trigger.AvailableNow())
            .start(output).awaitTermination(TimeUnit.MINUTES.toMillis(30));
        spark.stop();
    }
}
