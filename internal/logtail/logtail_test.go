package logtail

import (
	"fmt"
	"strings"
	"testing"
)

// TestLastErrorIsBounded: an error line longer than a status message should be is cut.
func TestLastErrorIsBounded(t *testing.T) {
	long := `{"level":"ERROR","msg":"` + strings.Repeat("x", 2*MaxError) + `"}`
	if got := LastError(long); len(got) != MaxError || !strings.HasSuffix(got, "...") {
		t.Errorf("LastError() has %d bytes, want %d ending in ...", len(got), MaxError)
	}
}

// TestTailKeepsTheEnd: a Tail holds the last Size bytes of everything written, however it
// was cut into writes, and its last error is the log's last.
func TestTailKeepsTheEnd(t *testing.T) {
	tail := &Tail{Size: 256}
	var all strings.Builder
	for i := range 100 {
		line := fmt.Sprintf("26/12/06 16:30:%02d INFO MemoryStore: block %d stored\n", i%60, i)
		if i == 97 {
			line = "26/12/06 16:30:37 ERROR MicroBatchExecution: Query orders terminated with error\njava.io.IOException: connection reset\n"
		}
		all.WriteString(line)
		if _, err := tail.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	got := tail.String()
	if want := all.String()[all.Len()-256:]; got != want {
		t.Errorf("Tail kept %q, want the last 256 bytes %q", got, want)
	}
	if e, want := LastError(got), "MicroBatchExecution: Query orders terminated with error: java.io.IOException: connection reset"; e != want {
		t.Errorf("LastError(tail) = %q, want %q", e, want)
	}
}
