package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestFailureMessage: the reason of a failed engine is its own message when it wrote one;
// else how it ended (signal, OOMKilled, exit code) and the last error line of the log tail
// the kubelet gives instead, never an INFO or WARN line of that tail.
func TestFailureMessage(t *testing.T) {
	engineInfo := `{"time":"2026-07-01T11:59:00Z","level":"INFO","msg":"Garbage collector set","settings":"GC percent 200"}
{"time":"2026-07-01T11:59:01Z","level":"INFO","msg":"Batch committed","batch":3}`
	engineError := `{"time":"2026-07-01T11:59:00Z","level":"INFO","msg":"Garbage collector set"}
{"time":"2026-07-01T11:59:01Z","level":"ERROR","msg":"Batch failed","error":"write offsets 4: connection refused"}
{"time":"2026-07-01T11:59:02Z","level":"INFO","msg":"Retrying"}`
	// Spark's log4j layout: an ERROR with its exception, then INFO lines, and a WARN with an
	// exception after it.
	sparkTail := `rk.scheduler.DAGScheduler.handleTaskCompletion(DAGScheduler.scala:2101)
26/12/06 16:30:01 ERROR MicroBatchExecution: Query orders [id = 1] terminated with error
java.lang.IllegalStateException: Cannot find the offsets of batch 7
	at org.apache.spark.sql.execution.streaming.MicroBatchExecution.run(MicroBatchExecution.scala:300)
26/12/06 16:30:02 INFO MemoryStore: Block broadcast_25_piece0 stored as bytes in memory
26/12/06 16:30:03 WARN JavaUtils: Attempt to delete using native Unix OS command failed for path = /tmp/artifacts-1
java.io.IOException: Cannot run program "rm": error=2, No such file or directory
	at java.base/java.lang.ProcessBuilder.start(ProcessBuilder.java:1143)`
	sparkInfo := `26/12/06 16:30:02 INFO MemoryStore: Block broadcast_25_piece0 stored as bytes in memory
26/12/06 16:30:03 WARN JavaUtils: Attempt to delete using native Unix OS command failed
java.io.IOException: Cannot run program "rm": error=2, No such file or directory`
	panicked := `{"time":"2026-07-01T11:59:00Z","level":"INFO","msg":"Garbage collector set"}
panic: runtime error: index out of range [3] with length 3

goroutine 1 [running]:
main.main()`
	tests := []struct {
		name string
		t    corev1.ContainerStateTerminated
		want string
	}{
		{"own message", corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "read sasl password: no such file\n"},
			"read sasl password: no such file"},
		{"killed, only INFO logged", corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", Message: engineInfo},
			"the engine was killed by signal SIGKILL (exit code 137) and logged no error before (kubectl logs --previous shows its log)"},
		{"killed after an error", corev1.ContainerStateTerminated{ExitCode: 143, Reason: "Error", Message: engineError},
			"the engine was killed by signal SIGTERM (exit code 143); the last error in its log: Batch failed: write offsets 4: connection refused"},
		{"spark error with its exception", corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: sparkTail},
			"the engine exited with code 1; the last error in its log: MicroBatchExecution: Query orders [id = 1] terminated with error: java.lang.IllegalStateException: Cannot find the offsets of batch 7"},
		{"spark INFO and WARN only", corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", Message: sparkInfo},
			"the engine was killed by signal SIGKILL (exit code 137) and logged no error before (kubectl logs --previous shows its log)"},
		{"OOMKilled", corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", Message: engineInfo},
			"the engine was killed for using more memory than its limit (OOMKilled, exit code 137; raise spec.resources.limits.memory) and logged no error before (kubectl logs --previous shows its log)"},
		{"panic", corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: panicked},
			"the engine exited with code 2; the last error in its log: panic: runtime error: index out of range [3] with length 3"},
		{"no message", corev1.ContainerStateTerminated{ExitCode: 128, Reason: "StartError"},
			"the engine exited with code 128 (StartError) and logged no error before (kubectl logs --previous shows its log)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := failureMessage(&tt.t); got != tt.want {
				t.Errorf("failureMessage() = %q, want %q", got, tt.want)
			}
		})
	}
}
