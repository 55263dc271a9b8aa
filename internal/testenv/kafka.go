package testenv

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Kafka starts an in-process Kafka-protocol broker (kfake) for this test, with
// auto-created topics of 4 partitions, and returns its bootstrap addresses.
// LOCKSTEP_TEST_KAFKA_BROKERS (comma-separated) points at a running cluster.
func Kafka(t testing.TB, opts ...kfake.Opt) []string {
	t.Helper()
	if brokers := os.Getenv("LOCKSTEP_TEST_KAFKA_BROKERS"); brokers != "" {
		return strings.Split(brokers, ",")
	}
	base := []kfake.Opt{kfake.ClusterID("lockstep-test"), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(4)}
	c, err := kfake.NewCluster(append(base, opts...)...)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// KafkaBroker is a Kafka-protocol broker in its own process, on a fixed port,
// persisting to a folder, so a test can kill and restart it.
type KafkaBroker struct {
	Addr string // host:port, stable across restarts

	t       testing.TB
	bin     string
	args    []string
	logPath string
	proc    *process
}

// KafkaProcess starts the kafka-broker test tool for this test. configs are
// broker configs such as "log.cleaner.backoff.ms=100". Create topics
// explicitly (CreateTopics): kfake does not persist auto-created topics, so
// they would be gone after a restart.
func KafkaProcess(t testing.TB, configs ...string) *KafkaBroker {
	t.Helper()
	return KafkaProcessAt(t, "127.0.0.1", configs...)
}

// KafkaProcessAt is KafkaProcess for a broker that listens on, and advertises, host
// instead of loopback: the e2e node's IP (Node.IP), so that pods reach it.
func KafkaProcessAt(t testing.TB, host string, configs ...string) *KafkaBroker {
	t.Helper()
	bin := Tool(t, "kafka-broker")
	port, err := freePortOn(host)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b := &KafkaBroker{
		Addr:    net.JoinHostPort(host, fmt.Sprint(port)),
		t:       t,
		bin:     bin,
		args:    []string{"-ports", fmt.Sprint(port), "-data-dir", filepath.Join(dir, "data")},
		logPath: filepath.Join(dir, "kafka-broker.log"),
	}
	if host != "127.0.0.1" {
		b.args = append(b.args, "-host", host)
	}
	if len(configs) > 0 {
		b.args = append(b.args, "-configs", strings.Join(configs, ","))
	}
	b.Start()
	t.Cleanup(b.Stop)
	return b
}

// Start starts the broker (again) and waits until it accepts connections.
func (b *KafkaBroker) Start() {
	b.t.Helper()
	p, err := startProcess("kafka-broker", b.bin, b.args, nil, b.logPath)
	if err != nil {
		b.t.Fatal(err)
	}
	if err := p.waitReady(tcpReady(b.Addr)); err != nil {
		b.t.Fatal(err)
	}
	b.proc = p
}

// Stop stops the broker gracefully (SIGTERM), a frozen one too.
func (b *KafkaBroker) Stop() {
	if b.proc != nil {
		b.Thaw()
		b.proc.stop()
	}
}

// Freeze suspends the broker's process (SIGSTOP) with its connections open: clients wait
// on it as on a hung broker, without an error. Thaw resumes it.
func (b *KafkaBroker) Freeze() {
	if b.proc != nil && !b.proc.exited() {
		_ = b.proc.cmd.Process.Signal(syscall.SIGSTOP)
	}
}

// Thaw resumes a frozen broker (SIGCONT).
func (b *KafkaBroker) Thaw() {
	if b.proc != nil && !b.proc.exited() {
		_ = b.proc.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// Kill stops the broker at once (SIGKILL), as a crash would.
func (b *KafkaBroker) Kill() {
	if b.proc != nil {
		b.proc.kill()
	}
}
