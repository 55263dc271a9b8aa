// Package logtail reads the end of a log for its last error: the engine's JSON lines
// (log/slog), Spark's log4j layout, a Go panic, a Java exception. The controller reads the
// tail the kubelet gives of a container that ended; the Spark runtime reads the tail of its
// JVM's log when the runner ended without saying why.
package logtail

import (
	"encoding/json"
	"regexp"
	"strings"
	"sync"
)

// MaxError bounds the error line LastError returns.
const MaxError = 512

// log4jLine matches the head of a log line of Spark's log4j layout
// ("26/12/06 16:22:01 INFO MemoryStore: …", or with an ISO date) and captures its level and
// the rest.
var log4jLine = regexp.MustCompile(`^\d{2,4}[-/]\d{2}[-/]\d{2}[ T]\d{2}:\d{2}:\d{2}\S*\s+(TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL)\s+(.*)$`)

// exceptionLine matches the first line of a Java exception ("java.io.IOException: …",
// "Caused by: …", `Exception in thread "main" …`).
var exceptionLine = regexp.MustCompile(`^(Caused by: |Exception in thread "[^"]*" )?([A-Za-z_$][\w$]*\.)+[\w$]*(Exception|Error|Throwable)\b`)

// logRecord is one record of a log: a line with a level and the lines after it that have
// none (a stack trace).
type logRecord struct {
	level, text string
	more        []string
}

// ParseLine reads one line of a log: the engine's JSON (log/slog) or Spark's log4j
// layout. ok is false for any other line.
func ParseLine(line string) (level, text string, ok bool) {
	if strings.HasPrefix(line, "{") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			return "", "", false
		}
		lvl, _ := rec["level"].(string)
		msg, _ := rec["msg"].(string)
		if lvl == "" {
			return "", "", false
		}
		for _, k := range []string{"error", "err"} {
			if v, ok := rec[k].(string); ok && v != "" {
				msg += ": " + v
				break
			}
		}
		return strings.ToUpper(lvl), msg, true
	}
	if m := log4jLine.FindStringSubmatch(line); m != nil {
		return m[1], m[2], true
	}
	return "", "", false
}

// LastError returns the last error of a log's tail: the last record at level ERROR or
// FATAL, with the exception its stack trace starts with; a Go panic; a Java exception that
// no log line announced (the JVM's own "Exception in thread …"). "" when there is none:
// never an INFO or WARN line, and never the exception of a WARN.
func LastError(tail string) string {
	var recs []logRecord
	for line := range strings.SplitSeq(tail, "\n") {
		line = strings.TrimRight(line, " \r\t")
		trimmed := strings.TrimSpace(line)
		if trimmed == "" {
			continue
		}
		if level, text, ok := ParseLine(trimmed); ok {
			recs = append(recs, logRecord{level: level, text: text})
			continue
		}
		switch {
		case strings.HasPrefix(trimmed, "panic: "), strings.HasPrefix(trimmed, "fatal error: "),
			strings.HasPrefix(trimmed, "Exception in thread "):
			recs = append(recs, logRecord{level: "ERROR", text: trimmed})
			continue
		}
		if len(recs) == 0 {
			recs = append(recs, logRecord{}) // the tail starts inside a record
		}
		recs[len(recs)-1].more = append(recs[len(recs)-1].more, trimmed)
	}
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		if r.level != "ERROR" && r.level != "FATAL" {
			continue
		}
		text := r.text
		for _, l := range r.more {
			if exceptionLine.MatchString(l) {
				if !strings.Contains(text, l) {
					text += ": " + l
				}
				break
			}
		}
		if len(text) > MaxError {
			text = text[:MaxError-3] + "..."
		}
		return text
	}
	return ""
}

// Tail is an io.Writer that keeps the last Size bytes written to it (64 KiB when Size is 0),
// for LastError once the writer is done. It is safe for concurrent use.
type Tail struct {
	Size int
	mu   sync.Mutex
	buf  []byte
}

// Write keeps the end of p, and of what came before it, within Size bytes. It lets the buffer
// grow to twice that before it drops the start, so that a write copies the kept bytes once
// per Size bytes written, not each time.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if size := t.size(); len(t.buf) > 2*size {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-size:]...)
	}
	return len(p), nil
}

func (t *Tail) size() int {
	if t.Size <= 0 {
		return 64 << 10
	}
	return t.Size
}

// String returns what Tail kept.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf[max(0, len(t.buf)-t.size()):])
}
