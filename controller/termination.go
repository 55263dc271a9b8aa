package controller

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// How an engine container ended, in words. The engine writes why it exits to its
// termination message (cmd/lockstep engine: the error, "completed: …", "stopped: …"); an
// engine that is killed (a signal, the kernel's OOM killer, the liveness probe after its
// grace) or that panics writes nothing, and the kubelet then gives the tail of its log
// instead (terminationMessagePolicy FallbackToLogsOnError): the last 80 lines, at most
// 2 KiB. That tail is no reason: it mostly holds INFO lines. So a message that is a log's
// tail is read for its last error line, and the reason leads with what the kubelet says of
// the end: the signal, OOMKilled, or the exit code.

// reasonOOMKilled is the kubelet's reason of a container the kernel killed for its memory.
const reasonOOMKilled = "OOMKilled"

// maxErrorLine bounds the error line quoted from a log's tail.
const maxErrorLine = 512

// ending is how an engine container ended.
type ending struct {
	// how says how it ended: "exited with code 1", "was killed by signal SIGKILL (exit
	// code 137)", "was killed for using more memory than its limit (OOMKilled, exit code 137)".
	how string
	// message is the engine's own termination message; "" when it wrote none.
	message string
	// logged is the last error line of the log's tail the kubelet gave instead of a
	// message; "" when there is none.
	logged string
}

// endingOf reads a terminated engine container.
func endingOf(t *corev1.ContainerStateTerminated) ending {
	e := ending{how: endedHow(t)}
	msg := strings.TrimSpace(t.Message)
	if isLogTail(msg) {
		e.logged = lastErrorLine(msg)
	} else {
		e.message = msg
	}
	return e
}

// endedHow says how a container ended from what the kubelet reports: the kernel's OOM
// killer, a signal (exit code 128+n), or an exit code.
func endedHow(t *corev1.ContainerStateTerminated) string {
	switch {
	case t.Reason == reasonOOMKilled:
		return fmt.Sprintf("was killed for using more memory than its limit (OOMKilled, exit code %d; raise spec.resources.limits.memory)", t.ExitCode)
	case t.Signal != 0:
		return fmt.Sprintf("was killed by signal %s (exit code %d)", signalName(t.Signal), t.ExitCode)
	case t.ExitCode > 128 && t.ExitCode <= 128+64:
		return fmt.Sprintf("was killed by signal %s (exit code %d)", signalName(t.ExitCode-128), t.ExitCode)
	case t.Reason != "" && t.Reason != "Error" && t.Reason != "Completed":
		return fmt.Sprintf("exited with code %d (%s)", t.ExitCode, t.Reason)
	default:
		return fmt.Sprintf("exited with code %d", t.ExitCode)
	}
}

// signalName names signal n as kill(1) does ("SIGKILL"); a signal without a name is numbered.
func signalName(n int32) string {
	if s := unix.SignalName(syscall.Signal(n)); s != "" {
		return s
	}
	return fmt.Sprintf("%d", n)
}

// failureMessage says why the engine container that ended as t failed, for status.lastFailure
// and the EngineFailed Event: the engine's own message when it wrote one (OOMKilled leads
// it: the engine may have written it on its way out); else how it ended, with the last
// error line of its log when there is one.
func failureMessage(t *corev1.ContainerStateTerminated) string {
	e := endingOf(t)
	switch {
	case e.message != "" && t.Reason != reasonOOMKilled:
		return e.message
	case e.message != "":
		return "the engine " + e.how + ": " + e.message
	case e.logged != "":
		return "the engine " + e.how + "; the last error in its log: " + e.logged
	default:
		return "the engine " + e.how + " and logged no error before (kubectl logs --previous shows its log)"
	}
}

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

// parseLogLine reads one line of a log: the engine's JSON (log/slog) or Spark's log4j
// layout. ok is false for any other line.
func parseLogLine(line string) (level, text string, ok bool) {
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

// isLogTail reports whether a termination message is the tail of the container's log that
// the kubelet gives when the engine wrote no message: it holds a log line, or a Go panic.
func isLogTail(msg string) bool {
	for line := range strings.SplitSeq(msg, "\n") {
		line = strings.TrimSpace(line)
		if _, _, ok := parseLogLine(line); ok {
			return true
		}
		if strings.HasPrefix(line, "goroutine ") && strings.Contains(msg, "panic: ") {
			return true
		}
	}
	return false
}

// lastErrorLine returns the last error of a log's tail: the last record at level ERROR or
// FATAL, with the exception its stack trace starts with; a Go panic; a Java exception that
// no log line announced (the JVM's own "Exception in thread …"). "" when there is none:
// never an INFO or WARN line, and never the exception of a WARN.
func lastErrorLine(tail string) string {
	var recs []logRecord
	for line := range strings.SplitSeq(tail, "\n") {
		line = strings.TrimRight(line, " \r\t")
		trimmed := strings.TrimSpace(line)
		if trimmed == "" {
			continue
		}
		if level, text, ok := parseLogLine(trimmed); ok {
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
		if len(text) > maxErrorLine {
			text = text[:maxErrorLine-3] + "..."
		}
		return text
	}
	return ""
}
