package dev.lockstep.spark;

import io.delta.tables.DeltaTable;
import org.apache.spark.api.java.function.VoidFunction2;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * Delta in update mode, in foreachBatch: each batch's rows (aliased s) are MERGEd into the table
 * (aliased t) on the plan's condition (engine/spark/plan.go MergeCondition), in one commit carrying Delta's
 * txn(appId = query id, version = batch id). A replayed batch finds its txn and Delta skips the
 * write, so the MERGE is idempotent, keyed by (query id, batch id) as Delta's own sink is.
 */
final class DeltaMergeSink implements VoidFunction2<Dataset<Row>, Long> {
  private static final long serialVersionUID = 1L;
  private static final String TXN_APP_ID = "spark.databricks.delta.write.txnAppId";
  private static final String TXN_VERSION = "spark.databricks.delta.write.txnVersion";

  private final Plan.Sink sink;
  private final String queryId;

  DeltaMergeSink(Plan.Sink sink, String queryId) {
    this.sink = sink;
    this.queryId = queryId;
  }

  @Override
  public void call(Dataset<Row> batch, Long batchId) {
    SparkSession spark = batch.sparkSession();
    if (!DeltaTable.isDeltaTable(spark, sink.path)) {
      // An empty table with the batch's schema; a concurrent creator wins harmlessly.
      batch.limit(0).write().format("delta").mode("append").partitionBy(sink.partitionColumns.toArray(new String[0])).save(sink.path);
    }
    // Delta skips a MERGE whose (txnAppId, txnVersion) it committed before without reading
    // the batch, which Spark would then fail: the batch is computed first, whatever MERGE does.
    batch = batch.persist();
    batch.count();
    spark.conf().set(TXN_APP_ID, queryId);
    spark.conf().set(TXN_VERSION, batchId.toString());
    try {
      DeltaTable.forPath(spark, sink.path).as("t")
          .merge(batch.as("s"), sink.mergeCondition)
          .whenMatched().updateAll()
          .whenNotMatched().insertAll()
          .execute();
    } finally {
      spark.conf().unset(TXN_APP_ID);
      spark.conf().unset(TXN_VERSION);
      batch.unpersist();
    }
  }
}
