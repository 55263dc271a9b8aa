package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startTimeout bounds how long a service may take to answer after its start.
const startTimeout = 60 * time.Second

// process is a service running as a child process. It dies with the test
// binary (Pdeathsig), so a crashed test leaves nothing running.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	waitErr error
}

// startProcess starts bin with args and env, its output appended to logPath.
func startProcess(name, bin string, args, env []string, logPath string) (*process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	return startCmd(name, cmd, logPath)
}

// startCmd starts cmd in its own process group, its output appended to logPath.
func startCmd(name string, cmd *exec.Cmd, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, waits up to 10 s, then kills.
func (p *process) stop() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.kill()
	}
}

// kill ends the process at once with SIGKILL.
func (p *process) kill() {
	if p.exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// logTail returns the last lines of the process's log, for error messages.
func (p *process) logTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

// waitReady polls ready until it succeeds, the process exits or startTimeout passes.
func (p *process) waitReady(ready func(context.Context) error) error {
	return p.waitReadyWithin(startTimeout, ready)
}

// waitReadyWithin is waitReady with another bound, for services slower than startTimeout.
func (p *process) waitReadyWithin(timeout time.Duration, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for {
		if p.exited() {
			return fmt.Errorf("%s exited during start (%v); log %s:\n%s", p.name, p.waitErr, p.logPath, p.logTail())
		}
		if last = ready(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			p.kill()
			return fmt.Errorf("%s did not answer within %s: %w; log %s:\n%s", p.name, timeout, last, p.logPath, p.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// httpReady answers when url returns any status below 500.
func httpReady(url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	ports, err := freePorts("127.0.0.1")
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// freePorts returns a TCP port on each of hosts that was free a moment ago, no two the same.
// Every listener stays open until the last port is found: one closed at once let the kernel
// hand its port out again, and a broker got one port for two of its listeners.
func freePorts(hosts ...string) ([]int, error) {
	ports := make([]int, 0, len(hosts))
	seen := map[int]bool{}
	for _, h := range hosts {
		for {
			l, err := net.Listen("tcp", net.JoinHostPort(h, "0"))
			if err != nil {
				return nil, fmt.Errorf("find a free port: %w", err)
			}
			defer l.Close()
			if p := l.Addr().(*net.TCPAddr).Port; !seen[p] { // the same number on another address
				seen[p] = true
				ports = append(ports, p)
				break
			}
		}
	}
	return ports, nil
}

// shared holds the services started once per test binary; Main stops them.
// It is the one piece of package state, as a TestMain-scoped registry.
var shared struct {
	mu          sync.Mutex
	dir         string
	stops       []func()
	s3          map[string]*s3Service
	pg          *pgService
	pgErr       error
	cp          *controlPlane
	cpErr       error
	kafka       *kafkaService
	kafkaErr    error
	registry    *Registry
	registryErr error
	buckets     int
	main        bool // Main runs the tests: it will stop the services
}

// needMain refuses to start a shared service in a test binary whose TestMain
// is not [Main]: nothing would stop the service, which would outlive the
// binary (a kube-apiserver and etcd per run, found left over on this machine).
func needMain() error {
	if !shared.main {
		return errors.New("this package's tests start shared test services, which only testenv.Main stops: " +
			"add `func TestMain(m *testing.M) { testenv.Main(m) }` to the package's tests")
	}
	return nil
}

// sharedDir returns a folder for the shared services' data and logs.
func sharedDir() (string, error) {
	if err := needMain(); err != nil {
		return "", err
	}
	if shared.dir != "" {
		return shared.dir, nil
	}
	dir, err := os.MkdirTemp("", "lockstep-testenv-")
	if err != nil {
		return "", fmt.Errorf("create testenv folder: %w", err)
	}
	shared.dir = dir
	return dir, nil
}

// TestJavaOptions are the JVM options of the JVMs the tests start (Spark's runner and the
// oracle, the registry; the Kafka broker overrides the compiler setting, see kafkaNode.jvm),
// through JAVA_TOOL_OPTIONS unless it is set: those JVMs are many, short-lived and fed small
// inputs, so the C1 compiler alone and the serial GC save much of their CPU (TestDifferential:
// 366 → 218 CPU-seconds) without changing what they compute. Production JVMs keep the JVM's
// defaults.
const TestJavaOptions = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

// testSparkConf are the Spark settings of the Spark queries the tests run: Spark evaluates
// expressions as it interprets them rather than generating and compiling Java for each query
// (Janino, which on the C1 compiler alone costs a short query more than its rows do: 22–28% of
// the user CPU of three Spark tests). The rows are the same: Spark's own tests hold its
// interpreted and generated paths equal.
var testSparkConf = [][2]string{{"spark.sql.codegen.factoryMode", "NO_CODEGEN"}, {"spark.sql.codegen.wholeStage", "false"}}

// TestSparkConf returns the tests' Spark settings, each written by format from its name and
// value. The JVMs the tests start on this machine read them as system properties (Main puts
// them in JAVA_TOOL_OPTIONS); a pod's JVM refuses Spark settings in its extraJavaOptions, so
// the e2e suite's queries write them into spec.runtime.spark.conf.
func TestSparkConf(format string) string {
	var b strings.Builder
	for _, kv := range testSparkConf {
		fmt.Fprintf(&b, format, kv[0], kv[1])
	}
	return b.String()
}

// Main runs the tests and then stops every shared service:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
func Main(m interface{ Run() int }) {
	if _, ok := os.LookupEnv("JAVA_TOOL_OPTIONS"); !ok {
		os.Setenv("JAVA_TOOL_OPTIONS", TestJavaOptions+TestSparkConf(" -D%s=%s"))
	}
	shared.mu.Lock()
	shared.main = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	for i := len(shared.stops) - 1; i >= 0; i-- {
		shared.stops[i]()
	}
	if shared.dir != "" && code == 0 {
		os.RemoveAll(shared.dir)
	}
	shared.mu.Unlock()
	os.Exit(code)
}

// ClosedAddr returns a loopback host:port where nothing listens, for tests of
// an unreachable server.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
