package dev.lockstep.spark;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * The runner's Go parent, over standard output and input. The runner asks it to commit what a
 * sink wrote: {@link #ask} prints one request line, {@code @@lockstep-request {json}}, and waits
 * for the one JSON line that answers it (engine/spark/files.go says what is asked). Every other
 * line of standard input is a command ("stop"; the Oracle's plan paths), read by
 * {@link #command}. One reader thread reads standard input; its end fails a request that waits
 * and ends the commands.
 */
final class Parent {
  static final String REQUEST_PREFIX = "@@lockstep-request ";

  private static final ObjectMapper JSON = new ObjectMapper();
  /** The end of standard input, in either queue. */
  private static final String EOF = new String("EOF");

  private static final BlockingQueue<String> replies = new LinkedBlockingQueue<>();
  private static final BlockingQueue<String> commands = new LinkedBlockingQueue<>();
  private static PrintStream out;

  private Parent() {}

  /** Starts reading standard input; requests go to out. Called once, before anything asks. */
  static synchronized void start(PrintStream stdout) {
    if (out != null) {
      throw new IllegalStateException("Parent started twice");
    }
    out = stdout;
    Thread t = new Thread(Parent::read, "lockstep-parent");
    t.setDaemon(true);
    t.start();
  }

  private static void read() {
    try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
      String line;
      while ((line = in.readLine()) != null) {
        if (line.startsWith("{")) {
          replies.add(line);
        } else {
          commands.add(line);
        }
      }
    } catch (IOException e) {
      System.err.println("lockstep runner: read standard input: " + e);
    }
    replies.add(EOF);
    commands.add(EOF);
  }

  /** Returns the next command line, or null at the end of standard input. */
  static String command() throws InterruptedException {
    String c = commands.take();
    if (c == EOF) {
      commands.add(EOF); // for any later call
      return null;
    }
    return c;
  }

  /**
   * Asks request of the parent and returns its answer. An answer with an "error", or none (the
   * parent is gone), is an IOException: the batch that asked fails. One request at a time.
   */
  static synchronized JsonNode ask(ObjectNode request) throws IOException, InterruptedException {
    long batch = request.path("batchId").asLong(-1);
    String line = REQUEST_PREFIX + JSON.writeValueAsString(request);
    synchronized (out) {
      out.println(line);
      out.flush();
    }
    String answer = replies.take();
    if (answer == EOF) {
      replies.add(EOF);
      throw new IOException("batch " + batch + ": the lockstep process closed the runner's input before it answered " + line);
    }
    JsonNode reply = JSON.readTree(answer);
    if (reply.hasNonNull("error")) {
      throw new IOException(reply.get("error").asText());
    }
    if (reply.path("batchId").asLong(-2) != batch) {
      throw new IOException("batch " + batch + ": the lockstep process answered for batch " + reply.path("batchId") + ": " + answer);
    }
    return reply;
  }

  /** A new request about batch of sink: {"sink", "op", "batchId"}. */
  static ObjectNode request(String sink, String op, long batch) {
    ObjectNode r = JSON.createObjectNode();
    r.put("sink", sink);
    r.put("op", op);
    r.put("batchId", batch);
    return r;
  }
}
