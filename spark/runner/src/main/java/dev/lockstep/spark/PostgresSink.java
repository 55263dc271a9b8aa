package dev.lockstep.spark;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.sql.Types;
import java.time.ZoneOffset;
import java.util.Iterator;
import java.util.List;

import org.apache.spark.api.java.function.VoidFunction2;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;

/**
 * PostgreSQL in foreachBatch, with the built-in sink's statements (the plan carries them): in one
 * transaction the (query id, batch id) row first — a batch already recorded committed before, and
 * the transaction is rolled back — then the replace, then the rows, then COMMIT. The batch's rows
 * pass through the driver.
 */
final class PostgresSink implements VoidFunction2<Dataset<Row>, Long> {
  private static final long serialVersionUID = 1L;
  private static final int CHUNK = 1000;

  private final Plan.Postgres pg;
  private final String queryId;

  PostgresSink(Plan.Postgres pg, String queryId) {
    this.pg = pg;
    this.queryId = queryId;
  }

  private Connection connect() throws SQLException {
    return DriverManager.getConnection(pg.jdbcUrl, pg.user, System.getenv("LOCKSTEP_SPARK_POSTGRES_PASSWORD"));
  }

  /** Runs the setup statements (the progress table, createTable) once, before the query starts. */
  void setup() throws SQLException {
    try (Connection c = connect(); Statement st = c.createStatement()) {
      for (String sql : pg.setup) {
        st.execute(sql);
      }
    }
  }

  @Override
  public void call(Dataset<Row> batch, Long batchId) throws SQLException {
    try (Connection c = connect()) {
      c.setAutoCommit(false);
      try {
        try (PreparedStatement rec = c.prepareStatement(pg.recordBatch)) {
          rec.setString(1, queryId);
          rec.setLong(2, batchId);
          if (rec.executeUpdate() == 0) {
            c.rollback(); // committed before: write nothing
            Runner.skip(batch);
            return;
          }
        }
        if (pg.replace != null && !pg.replace.isEmpty()) {
          try (Statement st = c.createStatement()) {
            st.execute(pg.replace);
          }
        }
        try (PreparedStatement ins = c.prepareStatement(pg.insert)) {
          int n = 0;
          for (Iterator<Row> it = batch.toLocalIterator(); it.hasNext(); ) {
            bind(ins, it.next(), pg.types);
            ins.addBatch();
            if (++n % CHUNK == 0) {
              ins.executeBatch();
            }
          }
          ins.executeBatch();
        }
        Crash.at(Crash.SINK_WRITE, batchId);
        c.commit();
      } catch (SQLException | RuntimeException e) {
        c.rollback();
        throw e;
      }
    }
  }

  private static void bind(PreparedStatement ps, Row r, List<String> types) throws SQLException {
    for (int i = 0; i < types.size(); i++) {
      int at = i + 1;
      if (r.isNullAt(i)) {
        ps.setNull(at, switch (types.get(i)) {
          case "long" -> Types.BIGINT;
          case "double" -> Types.DOUBLE;
          case "boolean" -> Types.BOOLEAN;
          case "timestamp" -> Types.TIMESTAMP_WITH_TIMEZONE;
          default -> Types.VARCHAR;
        });
        continue;
      }
      switch (types.get(i)) {
        case "long" -> ps.setLong(at, r.getLong(i));
        case "double" -> ps.setDouble(at, r.getDouble(i));
        case "boolean" -> ps.setBoolean(at, r.getBoolean(i));
        case "timestamp" -> ps.setObject(at, ((Timestamp) r.get(i)).toInstant().atOffset(ZoneOffset.UTC));
        default -> ps.setString(at, r.getString(i));
      }
    }
  }
}
