package testenv

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// KafkaVersion is the Apache Kafka release the tests run, kept equal to KAFKA_VERSION
// in hack/versions.env: `make tools` copies its jars to $LOCKSTEP_TOOLS/kafka-KafkaVersion/libs.
const KafkaVersion = "4.4.0"

// KafkaUser and KafkaPassword are the SASL user every broker of this package accepts
// on its SASL listener, with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512.
const (
	KafkaUser     = "alice"
	KafkaPassword = "s3cret"
)

// kafkaStartTimeout bounds a broker's start: a JVM, KRaft election and log recovery
// after a SIGKILL take longer than the other services.
const kafkaStartTimeout = 2 * time.Minute

// KafkaListeners are a broker's addresses (host:port), one per listener.
type KafkaListeners struct {
	Addr     string // PLAINTEXT
	SASLAddr string // SASL_SSL: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512
	TLSAddr  string // SSL, without SASL
	// ClusterID is the id the broker reports (random per broker).
	ClusterID string
	// CAFile is the PEM file of the CA that signed the TLS listeners' certificate,
	// when this package made it (KafkaOptions.Cert unset).
	CAFile string
}

// KafkaOptions configure a broker of a test's own ([KafkaProcessWith]).
type KafkaOptions struct {
	// Host is the address the broker listens on and advertises: the e2e node's IP
	// (Node.IP), so that pods reach it. Default 127.0.0.1.
	Host string
	// Configs are server.properties lines, key=value, added to (and overriding) the defaults.
	Configs []string
	// Users are SASL users besides KafkaUser, each accepted with PLAIN, SCRAM-SHA-256
	// and SCRAM-SHA-512.
	Users []KafkaCredentials
	// Cert is the TLS listeners' certificate; default one for Host signed by a CA this
	// package makes (KafkaListeners.CAFile).
	Cert *tls.Certificate
	// ClientCAs, PEM, makes the TLS listeners require a client certificate signed by one of them.
	ClientCAs []byte
	// SecureOnly keeps the PLAINTEXT listener on loopback (for this package's own admin
	// client), so that at Host the broker takes TLS connections only.
	SecureOnly bool
}

// KafkaCredentials are a SASL user's name and password.
type KafkaCredentials struct {
	Name, Password string
}

// Kafka returns the bootstrap address of the shared Apache Kafka broker of this test
// binary (KRaft, one node, started on first use on loopback ports), leased to this test
// and its subtests until it ends and emptied for it first: no topics but the ones
// [KafkaTopic] handed to other tests, no consumer groups. Tests may therefore name their
// topics freely; tests that call Kafka run one after another, parallel or not (a test
// waits for the lease). Auto-created topics get 4 partitions. Tests that run in parallel
// with others use [KafkaTopic] instead. The package's TestMain must be [Main].
func Kafka(t testing.TB) []string {
	t.Helper()
	return []string{KafkaShared(t).Addr}
}

// KafkaShared is [Kafka] with every listener of the shared broker: SASL over TLS
// (as KafkaUser) and TLS.
func KafkaShared(t testing.TB) KafkaListeners {
	t.Helper()
	k, err := sharedKafka()
	if err != nil {
		t.Fatal(err)
	}
	if k.lease(t) {
		if err := k.empty(); err != nil {
			t.Fatalf("empty the shared Kafka broker for %s: %v", t.Name(), err)
		}
	}
	return k.node.listeners
}

// KafkaTopic returns the shared broker's bootstrap address and a topic name no other
// test gets (name with a number), for tests that run in parallel with others: it takes
// no lease, and the emptying for [Kafka]'s tests leaves the topic alone (but not
// other topics the test writes, such as the exactly-once Kafka sink's marker topic).
func KafkaTopic(t testing.TB, name string) (brokers []string, topic string) {
	t.Helper()
	k, err := sharedKafka()
	if err != nil {
		t.Fatal(err)
	}
	shared.mu.Lock()
	shared.buckets++
	topic = fmt.Sprintf("%s-%d", name, shared.buckets)
	k.kept[topic] = true
	shared.mu.Unlock()
	return []string{k.node.listeners.Addr}, topic
}

// KafkaBroker is an Apache Kafka broker of a test's own, in its own process, on fixed
// ports, persisting to a folder of the test, so the test can stop, kill, freeze and
// restart it.
type KafkaBroker struct {
	KafkaListeners

	t    testing.TB
	node *kafkaNode
}

// KafkaProcess starts a broker of this test's own on loopback. configs are
// server.properties lines such as "log.retention.check.interval.ms=100".
func KafkaProcess(t testing.TB, configs ...string) *KafkaBroker {
	t.Helper()
	return KafkaProcessWith(t, KafkaOptions{Configs: configs})
}

// KafkaProcessAt is KafkaProcess for a broker that listens on, and advertises, host
// instead of loopback: the e2e node's IP (Node.IP), so that pods reach it.
func KafkaProcessAt(t testing.TB, host string, configs ...string) *KafkaBroker {
	t.Helper()
	return KafkaProcessWith(t, KafkaOptions{Host: host, Configs: configs})
}

// KafkaProcessWith starts a broker of this test's own as opts say, waits until it
// answers and kills it when the test ends. A start takes 3–10 s (a JVM).
func KafkaProcessWith(t testing.TB, opts KafkaOptions) *KafkaBroker {
	t.Helper()
	n, err := newKafkaNode(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	b := &KafkaBroker{KafkaListeners: n.listeners, t: t, node: n}
	t.Cleanup(b.Kill)
	b.Start()
	return b
}

// PID returns the broker process's id, 0 when it is not running.
func (b *KafkaBroker) PID() int {
	if p := b.node.proc; p != nil && !p.exited() {
		return p.cmd.Process.Pid
	}
	return 0
}

// Start starts the broker (again) and waits until it serves Kafka requests.
func (b *KafkaBroker) Start() {
	b.t.Helper()
	if err := b.node.start(); err != nil {
		b.t.Fatal(err)
	}
}

// Stop stops the broker gracefully (SIGTERM, then SIGKILL after 10 s), a frozen one too.
func (b *KafkaBroker) Stop() {
	if p := b.node.proc; p != nil {
		b.Thaw()
		p.stop()
	}
}

// Freeze suspends the broker's process (SIGSTOP) with its connections open: clients wait
// on it as on a hung broker, without an error. Thaw resumes it.
func (b *KafkaBroker) Freeze() { b.node.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen broker (SIGCONT).
func (b *KafkaBroker) Thaw() { b.node.signal(syscall.SIGCONT) }

// Kill stops the broker at once (SIGKILL), as a crash would.
func (b *KafkaBroker) Kill() {
	if p := b.node.proc; p != nil {
		p.kill()
	}
}

// kafkaService is the shared broker of a test binary and its lease.
type kafkaService struct {
	node *kafkaNode
	// Guarded by shared.mu:
	holder string          // the test holding the lease, "" when free
	free   chan struct{}   // closed when the lease is released
	kept   map[string]bool // topics KafkaTopic handed out, which emptying keeps
}

// sharedKafka starts the shared broker on first use.
func sharedKafka() (*kafkaService, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.kafka != nil || shared.kafkaErr != nil {
		return shared.kafka, shared.kafkaErr
	}
	dir, err := sharedDir()
	if err != nil {
		return nil, err
	}
	n, err := newKafkaNode(filepath.Join(dir, "kafka"), KafkaOptions{})
	if err == nil {
		err = n.start()
	}
	if err != nil {
		shared.kafkaErr = err
		return nil, err
	}
	shared.stops = append(shared.stops, func() { n.proc.kill() })
	shared.kafka = &kafkaService{node: n, kept: map[string]bool{}}
	return shared.kafka, nil
}

// lease waits until the broker is free or leased to an ancestor of t (or t), takes it
// for t if free, and reports whether it did; the lease ends with t.
func (k *kafkaService) lease(t testing.TB) bool {
	for {
		shared.mu.Lock()
		switch {
		case k.holder == "":
			k.holder, k.free = t.Name(), make(chan struct{})
			shared.mu.Unlock()
			t.Cleanup(func() {
				shared.mu.Lock()
				k.holder = ""
				close(k.free)
				shared.mu.Unlock()
			})
			return true
		case t.Name() == k.holder || strings.HasPrefix(t.Name(), k.holder+"/"):
			shared.mu.Unlock()
			return false
		}
		free := k.free
		shared.mu.Unlock()
		<-free
	}
}

// empty deletes every topic but the kept ones, and every consumer group, and waits
// until the topics are gone.
func (k *kafkaService) empty() error {
	// kadm's ListTopics answers from metadata up to MetadataMinAge old (default 5 s).
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.node.listeners.Addr), kgo.MetadataMinAge(10*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	doomed := func() ([]string, error) {
		topics, err := adm.ListTopics(ctx)
		if err != nil {
			return nil, fmt.Errorf("list topics: %w", err)
		}
		shared.mu.Lock()
		defer shared.mu.Unlock()
		var names []string
		for _, name := range topics.Names() {
			if !k.kept[name] {
				names = append(names, name)
			}
		}
		return names, nil
	}
	names, err := doomed()
	if err != nil {
		return err
	}
	if len(names) > 0 {
		resp, err := adm.DeleteTopics(ctx, names...)
		if err != nil {
			return fmt.Errorf("delete topics: %w", err)
		}
		for _, r := range resp {
			if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
				return fmt.Errorf("delete topic %s: %w", r.Topic, r.Err)
			}
		}
	}
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	if gs := groups.Groups(); len(gs) > 0 {
		// A group with members left by a killed client stays until its session times out.
		_, _ = adm.DeleteGroups(ctx, gs...)
	}
	for {
		names, err := doomed()
		if err != nil || len(names) == 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topics %v still listed after deletion", names)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// kafkaNode is one broker process: KRaft, combined broker and controller, on a data
// folder and ports that survive restarts.
type kafkaNode struct {
	dir       string
	java      string
	classpath string
	listeners KafkaListeners
	proc      *process
}

// newKafkaNode writes the broker's configuration and TLS files into dir and formats its
// storage; start runs it.
func newKafkaNode(dir string, opts KafkaOptions) (*kafkaNode, error) {
	java, err := LookupTool("java")
	if err != nil { // linked into the cache by the kafka step of hack/tools.sh
		return nil, &MissingToolError{Name: "kafka", Path: filepath.Join(ToolsDir(), "java")}
	}
	libs := filepath.Join(filepath.Dir(ToolsDir()), "kafka-"+KafkaVersion, "libs")
	if _, err := os.Stat(filepath.Join(libs, "kafka_2.13-"+KafkaVersion+".jar")); err != nil {
		return nil, &MissingToolError{Name: "kafka", Path: libs}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	host := opts.Host
	if host == "" {
		host = "127.0.0.1"
	}
	hosts := []string{host, host, host, "127.0.0.1"} // PLAINTEXT, SASL_SSL, SSL, CONTROLLER
	if opts.SecureOnly {
		hosts[0] = "127.0.0.1"
	}
	ports, err := freePorts(hosts...)
	if err != nil {
		return nil, err
	}
	plainHost := host
	if opts.SecureOnly {
		plainHost = "127.0.0.1"
	}
	n := &kafkaNode{
		dir:       dir,
		java:      java,
		classpath: filepath.Join(libs, "*"),
		listeners: KafkaListeners{
			Addr:     net.JoinHostPort(plainHost, fmt.Sprint(ports[0])),
			SASLAddr: net.JoinHostPort(host, fmt.Sprint(ports[1])),
			TLSAddr:  net.JoinHostPort(host, fmt.Sprint(ports[2])),
		},
	}
	keystore := filepath.Join(dir, "broker.pem")
	cert := opts.Cert
	if cert == nil {
		ca, err := newKafkaCA(dir, host)
		if err != nil {
			return nil, err
		}
		cert, n.listeners.CAFile = &ca.cert, ca.caFile
	}
	if err := writeKeystore(keystore, cert); err != nil {
		return nil, err
	}
	users := append([]KafkaCredentials{{KafkaUser, KafkaPassword}}, opts.Users...)
	props := n.serverProperties(ports[3], keystore, users)
	if len(opts.ClientCAs) > 0 {
		trust := filepath.Join(dir, "client-ca.pem")
		if err := os.WriteFile(trust, opts.ClientCAs, 0o600); err != nil {
			return nil, err
		}
		props = append(props, "ssl.truststore.type=PEM", "ssl.truststore.location="+trust, "ssl.client.auth=required")
	}
	props = append(props, opts.Configs...)
	if err := os.WriteFile(n.path("server.properties"), []byte(strings.Join(props, "\n")+"\n"), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(n.path("log4j2.properties"), []byte(kafkaLog4j), 0o600); err != nil {
		return nil, err
	}
	return n, n.format(users)
}

// serverProperties is the broker's server.properties: a single KRaft node with PLAINTEXT,
// SASL_SSL and SSL listeners, the users' SASL credentials and the TLS keystore, sized for tests.
func (n *kafkaNode) serverProperties(controllerPort int, keystore string, users []KafkaCredentials) []string {
	var plainUsers strings.Builder
	for _, u := range users {
		fmt.Fprintf(&plainUsers, " user_%s=%q", u.Name, u.Password)
	}
	scram := "org.apache.kafka.common.security.scram.ScramLoginModule required;"
	return []string{
		"process.roles=broker,controller",
		"node.id=1",
		fmt.Sprintf("controller.quorum.voters=1@127.0.0.1:%d", controllerPort),
		"controller.listener.names=CONTROLLER",
		fmt.Sprintf("listeners=PLAINTEXT://%s,SASL_SSL://%s,SSL://%s,CONTROLLER://127.0.0.1:%d",
			n.listeners.Addr, n.listeners.SASLAddr, n.listeners.TLSAddr, controllerPort),
		fmt.Sprintf("advertised.listeners=PLAINTEXT://%s,SASL_SSL://%s,SSL://%s",
			n.listeners.Addr, n.listeners.SASLAddr, n.listeners.TLSAddr),
		"inter.broker.listener.name=PLAINTEXT",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:PLAINTEXT",
		"log.dirs=" + filepath.Join(n.dir, "data"),
		// SASL and TLS.
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required" +
			plainUsers.String() + ";",
		"listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=" + scram,
		"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=" + scram,
		"ssl.keystore.type=PEM",
		"ssl.keystore.location=" + keystore,
		// Sized for tests on a 2-core machine, and a fresh, empty cluster like kfake's.
		"num.partitions=4",
		"auto.create.topics.enable=true",
		"num.network.threads=2",
		"num.io.threads=2",
		"num.recovery.threads.per.data.dir=1",
		"background.threads=2",
		"log.cleaner.threads=1",
		"offsets.topic.replication.factor=1",
		"offsets.topic.num.partitions=4",
		"transaction.state.log.replication.factor=1",
		"transaction.state.log.min.isr=1",
		"transaction.state.log.num.partitions=4",
		"share.coordinator.state.topic.replication.factor=1",
		"share.coordinator.state.topic.min.isr=1",
		"group.initial.rebalance.delay.ms=0",
		"log.segment.bytes=16777216",
		"log.index.size.max.bytes=1048576",
		// No retention unless a test sets it: records with old timestamps (the tests'
		// fixed dates) would otherwise go at once, older than the default 7 days.
		"log.retention.ms=-1",
		"log.retention.check.interval.ms=200",
		"log.initial.task.delay.ms=0",
		"delete.topic.enable=true",
	}
}

// kafkaLog4j keeps the broker's log short: warnings, and the lines of its start and stop.
const kafkaLog4j = `status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = out
logger.server.name = kafka.server.KafkaRaftServer
logger.server.level = info
`

func (n *kafkaNode) path(name string) string { return filepath.Join(n.dir, name) }

// jvm returns the java arguments that run class with args: a heap and a compiler
// sized for a 2-core machine shared by several test binaries. The broker lives as long as its
// test binary and the Kafka benchmarks measure against it, so it keeps the JVM's full tiered
// compilation (-XX:TieredStopAtLevel=4 overrides TestJavaOptions' C1 alone).
func (n *kafkaNode) jvm(class string, args ...string) []string {
	return append([]string{
		"-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:CICompilerCount=2", "-XX:TieredStopAtLevel=4", "-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + n.path("log4j2.properties"),
		"-cp", n.classpath, class,
	}, args...)
}

// format runs `kafka-storage format` with a new cluster id and the SCRAM users.
func (n *kafkaNode) format(users []KafkaCredentials) error {
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return err
	}
	n.listeners.ClusterID = base64.RawURLEncoding.EncodeToString(id)
	// --cluster-id=ID, not two arguments: an id that starts with "-" (a sixteenth of them,
	// in URL-safe base64) would read as an option.
	args := []string{"format", "--config", n.path("server.properties"),
		"--cluster-id=" + n.listeners.ClusterID, "--ignore-formatted"}
	for _, u := range users {
		for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
			args = append(args, "--add-scram", fmt.Sprintf("%s=[name=%s,password=%s]", mech, u.Name, u.Password))
		}
	}
	logPath := n.path("kafka-storage.log")
	p, err := startProcess("kafka-storage format", n.java, n.jvm("kafka.tools.StorageTool", args...), nil, logPath)
	if err != nil {
		return err
	}
	<-p.done
	if p.waitErr != nil {
		return fmt.Errorf("kafka-storage format: %w; log %s:\n%s", p.waitErr, logPath, p.logTail())
	}
	return nil
}

// start runs the broker and waits until it answers a metadata request with itself.
func (n *kafkaNode) start() error {
	p, err := startProcess("kafka", n.java, n.jvm("kafka.Kafka", n.path("server.properties")), nil, n.path("kafka.log"))
	if err != nil {
		return err
	}
	n.proc = p
	return p.waitReadyWithin(kafkaStartTimeout, kafkaReady(n.listeners.Addr))
}

// signal sends sig to a running broker.
func (n *kafkaNode) signal(sig syscall.Signal) {
	if n.proc != nil && !n.proc.exited() {
		_ = n.proc.cmd.Process.Signal(sig)
	}
}

// kafkaReady answers when the broker at addr lists itself as a broker and its
// controller: it registered with the quorum and serves requests.
func kafkaReady(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RetryTimeout(time.Second))
		if err != nil {
			return err
		}
		defer cl.Close()
		m, err := kadm.NewClient(cl).BrokerMetadata(ctx)
		if err != nil {
			return err
		}
		if len(m.Brokers) == 0 || m.Controller < 0 {
			return errors.New("no broker registered yet")
		}
		return nil
	}
}
