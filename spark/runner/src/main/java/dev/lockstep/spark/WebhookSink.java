package dev.lockstep.spark;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.stream.Stream;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.api.java.function.VoidFunction2;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;

/**
 * The webhook sink as the built-in engine's (engine/webhook): each batch's rows, the JSON objects
 * the plan's last step made, POSTed from the driver as {queryId, batchId, chunk, chunks, rows} in
 * chunks of at most maxRowsPerRequest, each with Idempotency-Key {@code <query id>:<batch
 * id>[:<chunk>]}; a 5xx, 408, 429 or a failed connection is retried with jittered backoff (or the
 * answer's Retry-After) for retryForMs, any other answer fails the batch. At-least-once: the
 * receiver de-duplicates by the key.
 */
final class WebhookSink implements VoidFunction2<Dataset<Row>, Long> {
  private static final long MIN_BACKOFF_MS = 200, MAX_BACKOFF_MS = 10_000;

  private final Plan.Webhook w;
  private final String queryId;
  private final Map<String, String> headers = new LinkedHashMap<>();
  private final HttpClient http;

  WebhookSink(Plan.Webhook w, String queryId) throws IOException {
    this.w = w;
    this.queryId = queryId;
    headers.putAll(w.headers);
    if (w.headersDir != null && !w.headersDir.isEmpty()) {
      // The mounted Secret: one file per header; Kubernetes' ..data links and dot files skipped.
      try (Stream<Path> files = Files.list(Path.of(w.headersDir))) {
        for (Path f : (Iterable<Path>) files::iterator) {
          if (!f.getFileName().toString().startsWith(".") && Files.isRegularFile(f)) {
            headers.put(f.getFileName().toString(), Files.readString(f).replaceAll("[\r\n]+$", ""));
          }
        }
      }
    }
    http = HttpClient.newBuilder().connectTimeout(Duration.ofMillis(w.timeoutMs)).build();
  }

  @Override
  public void call(Dataset<Row> batch, Long batchId) throws Exception {
    List<String> rows = batch.select("value").as(Encoders.STRING()).collectAsList();
    int chunks = (rows.size() + w.maxRowsPerRequest - 1) / w.maxRowsPerRequest;
    String qid = new ObjectMapper().writeValueAsString(queryId);
    for (int c = 0; c < chunks; c++) {
      List<String> part = rows.subList(c * w.maxRowsPerRequest, Math.min(rows.size(), (c + 1) * w.maxRowsPerRequest));
      String body = "{\"queryId\":" + qid + ",\"batchId\":" + batchId + ",\"chunk\":" + c + ",\"chunks\":" + chunks
          + ",\"rows\":[" + String.join(",", part) + "]}";
      String key = queryId + ":" + batchId + (chunks > 1 ? ":" + c : "");
      post(key, body);
    }
  }

  private void post(String key, String body) throws Exception {
    long deadline = System.currentTimeMillis() + w.retryForMs;
    long backoff = MIN_BACKOFF_MS;
    for (int attempt = 1; ; attempt++) {
      HttpRequest.Builder req = HttpRequest.newBuilder(URI.create(w.url)).timeout(Duration.ofMillis(w.timeoutMs))
          .POST(HttpRequest.BodyPublishers.ofString(body, StandardCharsets.UTF_8));
      headers.forEach(req::header);
      req.header("Content-Type", "application/json").header("Idempotency-Key", key);
      String failure;
      boolean refused = false;
      long wait = backoff / 2 + ThreadLocalRandom.current().nextLong(backoff / 2 + 1);
      try {
        HttpResponse<String> r = http.send(req.build(), HttpResponse.BodyHandlers.ofString());
        int code = r.statusCode();
        if (code / 100 == 2) {
          return;
        }
        String snippet = r.body().length() > 512 ? r.body().substring(0, 512) : r.body();
        failure = "the receiver answered " + code + (snippet.isBlank() ? "" : ": " + snippet.strip());
        refused = code < 500 && code != 408 && code != 429;
        String retryAfter = r.headers().firstValue("Retry-After").orElse("");
        if (retryAfter.matches("[0-9]+")) {
          wait = Long.parseLong(retryAfter) * 1000;
        }
      } catch (IOException e) { // no answer: a refused or reset connection, a timeout
        failure = e.toString();
      }
      if (refused) {
        throw new IOException("POST " + w.url + " (Idempotency-Key " + key + "): " + failure
            + "; not retried: the receiver refused the request");
      }
      if (System.currentTimeMillis() + wait > deadline) {
        throw new IOException("POST " + w.url + " (Idempotency-Key " + key + "): " + failure + "; gave up after "
            + attempt + " attempts in " + w.retryForMs + " ms");
      }
      System.err.println("lockstep: webhook request failed; retrying in " + wait + " ms (attempt " + attempt + ", key " + key + "): " + failure);
      Thread.sleep(wait);
      backoff = Math.min(2 * backoff, MAX_BACKOFF_MS);
    }
  }
}
