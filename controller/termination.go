package controller

import (
	"fmt"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-dev/lockstep/internal/logtail"
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
		e.logged = logtail.LastError(msg)
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

// isLogTail reports whether a termination message is the tail of the container's log that
// the kubelet gives when the engine wrote no message: it holds a log line, or a Go panic.
func isLogTail(msg string) bool {
	for line := range strings.SplitSeq(msg, "\n") {
		line = strings.TrimSpace(line)
		if _, _, ok := logtail.ParseLine(line); ok {
			return true
		}
		if strings.HasPrefix(line, "goroutine ") && strings.Contains(msg, "panic: ") {
			return true
		}
	}
	return false
}
