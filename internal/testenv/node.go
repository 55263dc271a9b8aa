package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/lockstep-dev/lockstep/internal/gobuild"
	"github.com/lockstep-dev/lockstep/internal/ociimage"
)

// The e2e node's fixed addresses. The ports sit below the ephemeral range (32768+) where
// FreePort's ports live, so they never collide with other tests' servers; the fixed ports,
// host paths and iptables chains are why only one node runs per machine (see nodeLock).
const (
	nodeEtcdPort     = 12379
	nodeEtcdPeerPort = 12380
	nodeAPIPort      = 16443
	nodeServiceCIDR  = "10.96.0.0/16"
	nodePodCIDR      = "10.244.0.0/24"
	nodeBridge       = "lockstep-e2e0"
	nodeCNIName      = "lockstep-e2e"
	nodePauseImage   = "localhost/lockstep-e2e/pause:1"
	// nodeStartTimeout bounds each component's start; the API server is the slow one
	// (a few seconds idle, a minute or more on a loaded 2-core machine).
	nodeStartTimeout = 5 * time.Minute
)

// nodeFixedPorts are the ports the node's components bind on every address or on loopback:
// a start fails early, naming the port, when one is taken.
var nodeFixedPorts = map[int]string{
	nodeEtcdPort: "etcd", nodeEtcdPeerPort: "etcd peer", nodeAPIPort: "kube-apiserver",
	10250: "kubelet", 10248: "kubelet healthz", 10257: "kube-controller-manager",
	10259: "kube-scheduler", 10249: "kube-proxy metrics", 10256: "kube-proxy healthz",
}

// nodeTools are the cached binaries a node needs (hack/tools.sh kube_node node_packages,
// besides etcd and kube-apiserver).
var nodeTools = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
	"kubelet", "kube-proxy", "kubectl", "containerd", "containerd-shim-runc-v2", "ctr", "runc"}

// Node is a real single-node Kubernetes cluster on this machine: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, containerd (with runc and the CNI bridge
// plugin), kubelet and kube-proxy as child processes of the test binary. Pods run for
// real; images come from tarballs imported with [Node.ImportImage] (there is no registry:
// use imagePullPolicy Never or IfNotPresent); there is no cluster DNS, so pods reach
// services by IP. The node's components log under Dir/logs.
type Node struct {
	Name       string       // the node's name: this machine's host name
	IP         string       // the node's address (of the default route); pods reach host servers bound to it
	Kubeconfig string       // an admin (system:masters) kubeconfig file
	Config     *rest.Config // the same as a rest.Config
	Dir        string       // state and logs of this run

	bins  map[string]string
	sock  string // containerd's socket
	pki   *nodePKI
	state nodeState
	procs []*process // in start order
	lock  *os.File
}

// nodeState records what a run changed on the host beyond Dir, so that its teardown (or
// the next run's, after a crash) undoes exactly that.
type nodeState struct {
	IPForward       string   `json:"ipForward"`
	NetnsBefore     []string `json:"netnsBefore"`
	ShimsBefore     []string `json:"shimsBefore"`
	HostDirsCreated []string `json:"hostDirsCreated"`
}

// hostDirs are host paths containerd, kubelet and the CNI plugins use whatever their
// configured folders: those a run creates, it removes again.
var hostDirs = []string{"/run/containerd", "/run/netns", "/var/lib/cni", "/var/lib/kubelet", "/var/log/containers"}

// RealNode returns the real node of this test binary, started on first use (about 10 s
// idle, longer on a loaded machine) and stopped by [Main], which also undoes its changes
// to the host: iptables chains, the CNI bridge, cgroups, mounts, net.ipv4.ip_forward.
// It needs root, and the binaries `make tools` builds and installs (kubelet, containerd,
// runc, the CNI plugins, ...); without them it fails with the command to run. Only one
// node runs per machine: a second test binary waits for the first to finish.
func RealNode(t testing.TB) *Node {
	t.Helper()
	nodeShared.mu.Lock()
	defer nodeShared.mu.Unlock()
	if nodeShared.node == nil && nodeShared.err == nil {
		shared.mu.Lock()
		nodeShared.err = needMain()
		shared.mu.Unlock()
	}
	if nodeShared.node == nil && nodeShared.err == nil {
		nodeShared.node, nodeShared.err = startNode(t)
		if nodeShared.node != nil {
			shared.mu.Lock()
			shared.stops = append(shared.stops, nodeShared.node.stop)
			shared.mu.Unlock()
		}
	}
	if nodeShared.err != nil {
		t.Fatal(nodeShared.err)
	}
	return nodeShared.node
}

// Kubectl runs the node's kubectl (v1.37) with its admin kubeconfig and returns its
// standard output; an error carries the standard error.
func (n *Node) Kubectl(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	cmd := n.KubectlCommand(ctx, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// KubectlCommand is the node's kubectl with its admin kubeconfig, for a caller that wants
// more of its output than Kubectl returns (the warnings of a command that succeeded).
func (n *Node) KubectlCommand(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, n.bins["kubectl"], args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+n.Kubeconfig)
	return cmd
}

// ImportImage loads an image tarball (docker-archive or OCI, e.g. from internal/ociimage)
// into the node's containerd, where the kubelet finds it.
func (n *Node) ImportImage(tarball string) error {
	out, err := exec.Command(n.bins["ctr"], "-a", n.sock, "-n", "k8s.io", "images", "import", tarball).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr images import %s: %w\n%s", tarball, err, out)
	}
	return nil
}

// Diagnose returns the last error lines of every component's log, for a failing test.
func (n *Node) Diagnose() string {
	var b strings.Builder
	logs, _ := filepath.Glob(filepath.Join(n.Dir, "logs", "*.log"))
	for _, f := range logs {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var errs []string
		for _, l := range strings.Split(string(data), "\n") {
			if len(l) > 0 && (l[0] == 'E' || l[0] == 'F') && len(l) > 5 && l[1] >= '0' && l[1] <= '9' ||
				strings.Contains(l, "level=error") || strings.Contains(l, "level=fatal") {
				if len(l) > 400 {
					l = l[:400]
				}
				errs = append(errs, l)
			}
		}
		if len(errs) > 5 {
			errs = errs[len(errs)-5:]
		}
		if len(errs) > 0 {
			fmt.Fprintf(&b, "--- %s (last errors)\n%s\n", f, strings.Join(errs, "\n"))
		}
	}
	return b.String()
}

// nodeDir is the fixed folder of the node's state: fixed, so that a run finds and cleans
// what a crashed run left.
func nodeDir() string { return filepath.Join(os.TempDir(), "lockstep-e2e-node") }

func startNode(t testing.TB) (*Node, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the real-node e2e tests need root (kubelet, containerd, iptables): run them as root")
	}
	n := &Node{Dir: nodeDir(), bins: map[string]string{}}
	for _, name := range nodeTools {
		p, err := LookupTool(name)
		if err != nil {
			return nil, fmt.Errorf("%w (the node's tools: hack/tools.sh kube_node node_packages)", err)
		}
		n.bins[name] = p
	}
	for _, need := range []string{"/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/portmap"} {
		if _, err := os.Stat(need); err != nil {
			return nil, fmt.Errorf("CNI plugin %s not found: run `make tools` (or `hack/tools.sh node_packages`), which installs containernetworking-plugins", need)
		}
	}
	for _, cmd := range []string{"iptables", "ip"} {
		if _, err := exec.LookPath(cmd); err != nil {
			return nil, fmt.Errorf("%s not found: run `make tools` (or `hack/tools.sh node_packages`)", cmd)
		}
	}
	lock, err := nodeLock(t)
	if err != nil {
		return nil, err
	}
	n.lock = lock
	if err := n.hostFacts(); err != nil {
		n.unlock()
		return nil, err
	}
	// A run that crashed (SIGKILL, a power cut) left its shims, mounts and chains: undo them.
	teardownNode(n.Dir, n.bins["kube-proxy"], func(string, ...any) {})
	for port, who := range nodeFixedPorts {
		if l, err := net.Listen("tcp", fmt.Sprintf(":%d", port)); err != nil {
			n.unlock()
			return nil, fmt.Errorf("port %d (%s of the e2e node) is in use: %w", port, who, err)
		} else {
			l.Close()
		}
	}
	if err := n.start(); err != nil {
		diag := n.Diagnose()
		n.stop()
		return nil, fmt.Errorf("start the e2e node: %w\n%s", err, diag)
	}
	return n, nil
}

// nodeLock takes the machine-wide lock of the e2e node, waiting while another test binary
// holds it. The kernel releases it when the process ends, however it ends.
func nodeLock(t testing.TB) (*os.File, error) {
	path := filepath.Join(os.TempDir(), "lockstep-e2e-node.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the e2e node lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Logf("another test binary runs the e2e node (lock %s): waiting for it to finish", path)
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
	}
	return f, nil
}

func (n *Node) unlock() {
	if n.lock != nil {
		n.lock.Close() // closing the last descriptor releases the flock
		n.lock = nil
	}
}

// hostFacts finds the node's name and address. The address is the default route's: the
// host name resolves to 127.0.0.1 on these machines, which pods cannot use.
// LOCKSTEP_TEST_NODE_IP sets it.
func (n *Node) hostFacts() error {
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	n.Name = strings.ToLower(host)
	ip := os.Getenv("LOCKSTEP_TEST_NODE_IP")
	if ip == "" {
		if ip, err = defaultRouteIP(); err != nil {
			return fmt.Errorf("%w: set LOCKSTEP_TEST_NODE_IP to the address pods should use to reach this machine", err)
		}
	}
	n.IP = ip
	return nil
}

// defaultRouteIP returns the IPv4 address of the interface of the default route.
func defaultRouteIP() (string, error) {
	iface, err := defaultRouteInterface()
	if err != nil {
		return "", err
	}
	addrs, err := iface.Addrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return ipn.IP.String(), nil
		}
	}
	return "", fmt.Errorf("interface %s of the default route has no IPv4 address", iface.Name)
}

// defaultRouteInterface reads /proc/net/route for the interface of destination 0.0.0.0/0.
func defaultRouteInterface() (*net.Interface, error) {
	data, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return nil, fmt.Errorf("read the routing table: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 7 && f[1] == "00000000" && f[7] == "00000000" {
			return net.InterfaceByName(f[0])
		}
	}
	return nil, errors.New("no default route")
}

// start brings the cluster up in dependency order; on an error the caller stops what started.
func (n *Node) start() error {
	logs := filepath.Join(n.Dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}
	if err := n.prepareHost(); err != nil {
		return err
	}
	pki, err := newNodePKI(filepath.Join(n.Dir, "pki"), n.Name, net.ParseIP(n.IP), net.IPv4(10, 96, 0, 1))
	if err != nil {
		return err
	}
	n.pki = pki
	n.Kubeconfig = filepath.Join(n.Dir, "admin.kubeconfig")
	server := fmt.Sprintf("https://127.0.0.1:%d", nodeAPIPort)
	if err := os.WriteFile(n.Kubeconfig, []byte(pki.kubeconfig(server, "admin")), 0o600); err != nil {
		return err
	}
	kubeletKubeconfig := filepath.Join(n.Dir, "kubelet.kubeconfig")
	if err := os.WriteFile(kubeletKubeconfig, []byte(pki.kubeconfig(server, "kubelet")), 0o600); err != nil {
		return err
	}
	n.Config = &rest.Config{Host: server, TLSClientConfig: rest.TLSClientConfig{
		CAFile: pki.path("ca.crt"), CertFile: pki.path("admin.crt"), KeyFile: pki.path("admin.key"),
	}, QPS: 50, Burst: 100}
	cs, err := kubernetes.NewForConfig(n.Config)
	if err != nil {
		return err
	}
	for _, step := range []func(*kubernetes.Clientset) error{
		n.startEtcd, n.startAPIServer, n.startControllers, n.startContainerd,
		func(cs *kubernetes.Clientset) error { return n.startKubelet(cs, kubeletKubeconfig) },
		weighPods, n.startProxy, waitDefaultServiceAccount,
	} {
		if err := step(cs); err != nil {
			return err
		}
	}
	return nil
}

// prepareHost records the host's state, then sets what pods need: IP forwarding and
// bridged traffic through iptables (for Service addresses).
func (n *Node) prepareHost() error {
	fwd, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil {
		return err
	}
	n.state.IPForward = strings.TrimSpace(string(fwd))
	n.state.NetnsBefore = listDir("/run/netns")
	n.state.ShimsBefore = listDir("/run/containerd/s")
	for _, d := range hostDirs {
		if _, err := os.Stat(d); os.IsNotExist(err) {
			n.state.HostDirsCreated = append(n.state.HostDirsCreated, d)
		}
	}
	data, err := json.Marshal(n.state)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.Dir, "state.json"), data, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return fmt.Errorf("set net.ipv4.ip_forward=1: %w", err)
	}
	// Present once the bridge module is loaded; containerd's CNI bridge loads it.
	_ = os.WriteFile("/proc/sys/net/bridge/bridge-nf-call-iptables", []byte("1"), 0o644)
	return nil
}

func listDir(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// run starts a component, its output in logs/NAME.log.
func (n *Node) run(name string, args ...string) (*process, error) {
	p, err := startProcess(name, n.bins[name], args, nil, filepath.Join(n.Dir, "logs", name+".log"))
	if err != nil {
		return nil, err
	}
	n.procs = append(n.procs, p)
	return p, nil
}

func (n *Node) startEtcd(*kubernetes.Clientset) error {
	client := fmt.Sprintf("http://127.0.0.1:%d", nodeEtcdPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", nodeEtcdPeerPort)
	p, err := n.run("etcd", "--name", "lockstep-e2e", "--data-dir", filepath.Join(n.Dir, "etcd"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "lockstep-e2e="+peer, "--unsafe-no-fsync", "--quota-backend-bytes", "1073741824",
		"--listen-metrics-urls", "")
	if err != nil {
		return err
	}
	return p.waitReadyWithin(nodeStartTimeout, httpReady(client+"/health"))
}

func (n *Node) startAPIServer(cs *kubernetes.Clientset) error {
	k := n.pki.path
	p, err := n.run("kube-apiserver", "--etcd-servers", fmt.Sprintf("http://127.0.0.1:%d", nodeEtcdPort),
		"--bind-address", "0.0.0.0", "--advertise-address", n.IP, "--secure-port", fmt.Sprint(nodeAPIPort),
		"--tls-cert-file", k("apiserver.crt"), "--tls-private-key-file", k("apiserver.key"), "--client-ca-file", k("ca.crt"),
		"--service-account-key-file", k("sa.pub"), "--service-account-signing-key-file", k("sa.key"),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range", nodeServiceCIDR, "--authorization-mode", "Node,RBAC",
		"--enable-admission-plugins", "NodeRestriction",
		"--kubelet-client-certificate", k("admin.crt"), "--kubelet-client-key", k("admin.key"),
		"--kubelet-preferred-address-types", "InternalIP,Hostname",
		"--allow-privileged", "--cert-dir", filepath.Join(n.Dir, "apiserver-certs"), "--profiling=false")
	if err != nil {
		return err
	}
	return p.waitReadyWithin(nodeStartTimeout, func(ctx context.Context) error {
		return cs.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
	})
}

// startControllers starts kube-controller-manager (service account tokens, the root CA
// ConfigMap, Deployments, Jobs, garbage collection) and kube-scheduler.
func (n *Node) startControllers(*kubernetes.Clientset) error {
	k := n.pki.path
	if _, err := n.run("kube-controller-manager", "--kubeconfig", n.Kubeconfig,
		"--authentication-kubeconfig", n.Kubeconfig, "--authorization-kubeconfig", n.Kubeconfig,
		"--service-account-private-key-file", k("sa.key"), "--root-ca-file", k("ca.crt"),
		"--cluster-signing-cert-file", k("ca.crt"), "--cluster-signing-key-file", k("ca.key"),
		"--leader-elect=false", "--bind-address", "127.0.0.1",
		"--secure-port", "10257", "--cert-dir", filepath.Join(n.Dir, "kcm-certs"),
		"--service-cluster-ip-range", nodeServiceCIDR); err != nil {
		return err
	}
	_, err := n.run("kube-scheduler", "--kubeconfig", n.Kubeconfig,
		"--authentication-kubeconfig", n.Kubeconfig, "--authorization-kubeconfig", n.Kubeconfig,
		"--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", "10259",
		"--cert-dir", filepath.Join(n.Dir, "scheduler-certs"))
	return err
}

// containerdConfig is containerd 1.6's configuration for the node; every folder is under
// the node's Dir (containerd still puts shim sockets in /run/containerd/s).
const containerdConfig = `version = 2
root = "{{dir}}/containerd/root"
state = "{{dir}}/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{{sock}}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{{dir}}/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{pause}}"
  # Root lacks CAP_SYS_RESOURCE on some VMs, so runc cannot set an oom_score_adj below
  # containerd's own (-998 for sandboxes) and every pod would fail ("can't get final
  # child's PID from pipe"): clamp instead.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "{{runc}}"
        Root = "{{dir}}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{{dir}}/cni/net.d"
`

// cniConfig is the pod network: a bridge with NAT to the outside, host-local addresses,
// and the MTU of the default route's interface (1400 on some VMs; a larger pod MTU
// stalls TCP).
const cniConfig = `{
  "cniVersion": "1.0.0",
  "name": "{{name}}",
  "plugins": [
    {"type": "bridge", "bridge": "{{bridge}}", "isGateway": true, "ipMasq": true, "hairpinMode": true, "mtu": {{mtu}},
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "{{subnet}}"}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "{{dir}}/cni/ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`

func (n *Node) startContainerd(*kubernetes.Clientset) error {
	for _, d := range []string{"containerd", "cni/net.d", "cni/ipam", "runc"} {
		if err := os.MkdirAll(filepath.Join(n.Dir, d), 0o755); err != nil {
			return err
		}
	}
	n.sock = filepath.Join(n.Dir, "containerd", "containerd.sock")
	mtu := 1500
	if iface, err := defaultRouteInterface(); err == nil {
		mtu = iface.MTU
	}
	r := strings.NewReplacer("{{dir}}", n.Dir, "{{sock}}", n.sock, "{{pause}}", nodePauseImage, "{{runc}}", n.bins["runc"],
		"{{name}}", nodeCNIName, "{{bridge}}", nodeBridge, "{{mtu}}", fmt.Sprint(mtu), "{{subnet}}", nodePodCIDR)
	config := filepath.Join(n.Dir, "containerd.toml")
	if err := os.WriteFile(config, []byte(r.Replace(containerdConfig)), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.Dir, "cni", "net.d", "10-lockstep-e2e.conflist"), []byte(r.Replace(cniConfig)), 0o644); err != nil {
		return err
	}
	pause, err := n.pauseImage()
	if err != nil {
		return err
	}
	p, err := n.run("containerd", "--config", config)
	if err != nil {
		return err
	}
	if err := p.waitReadyWithin(nodeStartTimeout, func(ctx context.Context) error {
		return exec.CommandContext(ctx, n.bins["ctr"], "-a", n.sock, "version").Run()
	}); err != nil {
		return err
	}
	return n.ImportImage(pause)
}

// pauseImage builds the pod sandbox image from internal/testenv/pause.
func (n *Node) pauseImage() (string, error) {
	bin := filepath.Join(n.Dir, "pause")
	if err := gobuild.Static(context.Background(), moduleRoot(), "./internal/testenv/pause", bin, ""); err != nil {
		return "", err
	}
	out := filepath.Join(n.Dir, "pause.tar")
	_, err := ociimage.Write(ociimage.Spec{Ref: nodePauseImage, Binary: bin, Entrypoint: "/pause", User: "65535:65535"}, out)
	return out, err
}

// kubeletConfig is the kubelet's configuration for these machines.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://{{sock}}
cgroupDriver: cgroupfs          # no systemd; must match containerd's SystemdCgroup = false
failCgroupV1: false             # some kernels here mount cgroup v1; kubelet >= 1.35 refuses it by default
failSwapOn: false
podLogsDir: {{dir}}/pod-logs
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: {{ca}}}
authorization: {mode: AlwaysAllow}
readOnlyPort: 0
port: 10250
healthzBindAddress: 127.0.0.1
healthzPort: 10248
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
serializeImagePulls: false
imageGCHighThresholdPercent: 100   # never collect images: they cannot be pulled again
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
syncFrequency: 10s
fileCheckFrequency: 10s
nodeStatusReportFrequency: 10s
`

func (n *Node) startKubelet(cs *kubernetes.Clientset, kubeconfig string) error {
	config := filepath.Join(n.Dir, "kubelet.yaml")
	r := strings.NewReplacer("{{sock}}", n.sock, "{{dir}}", n.Dir, "{{ca}}", n.pki.path("ca.crt"))
	if err := os.WriteFile(config, []byte(r.Replace(kubeletConfig)), 0o644); err != nil {
		return err
	}
	p, err := n.run("kubelet", "--config", config, "--kubeconfig", kubeconfig,
		"--root-dir", filepath.Join(n.Dir, "kubelet"), "--cert-dir", filepath.Join(n.Dir, "kubelet", "pki"),
		"--node-ip", n.IP, "--hostname-override", n.Name, "--v", "2")
	if err != nil {
		return err
	}
	return p.waitReadyWithin(nodeStartTimeout, func(ctx context.Context) error {
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("node %s is not Ready", n.Name)
	})
}

// podsWeight is the CPU weight of all the node's pods together, in nice-0 threads of the
// host. The kubelet gives its pods' cgroup the weight of the node's allocatable CPU: two
// threads on a 2-core machine. That is right on a node of its own, where nothing outside the
// pods needs the CPU, and wrong here, where the host also runs the test suite: with cgroup
// v1, each runnable thread of the host weighs as much as one core of pods, so under the
// suite's own load (other packages' tests, JVMs, compilers; 8-15 runnable threads) every pod
// together got a sixth of the machine, and a Spark query's 4-row batch took minutes. Four
// threads a core gives the pods about half of a machine that busy, and all of an idle one.
const podsWeight = 4

// weighPods sets the weight of the kubelet's pods cgroup to podsWeight threads per core (it
// sets it once, when it starts, and leaves it after). Run after the kubelet is Ready.
func weighPods(*kubernetes.Clientset) error {
	for _, root := range kubepodsCgroups() {
		file, value := filepath.Join(root, "cpu.shares"), 1024*podsWeight*runtime.NumCPU() // v1: 1024 a nice-0 thread
		if _, err := os.Stat(file); err != nil {
			file, value = filepath.Join(root, "cpu.weight"), min(100*podsWeight*runtime.NumCPU(), 10000) // v2: 100
			if _, err := os.Stat(file); err != nil {
				continue // a v1 hierarchy without the cpu controller
			}
		}
		if err := os.WriteFile(file, []byte(strconv.Itoa(value)), 0o644); err != nil {
			return fmt.Errorf("weigh the node's pods against the host's processes: %w", err)
		}
	}
	return nil
}

// startProxy starts kube-proxy (iptables), without which pods cannot reach Services, the
// API server's kubernetes Service included.
func (n *Node) startProxy(*kubernetes.Clientset) error {
	p, err := n.run("kube-proxy", "--kubeconfig", n.Kubeconfig, "--hostname-override", n.Name,
		"--proxy-mode", "iptables", "--cluster-cidr", nodePodCIDR, "--iptables-localhost-nodeports=false",
		"--conntrack-max-per-core", "0", "--conntrack-tcp-timeout-established", "0", "--conntrack-tcp-timeout-close-wait", "0",
		"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10256")
	if err != nil {
		return err
	}
	return p.waitReadyWithin(nodeStartTimeout, httpReady("http://127.0.0.1:10256/healthz"))
}

// waitDefaultServiceAccount waits for kube-controller-manager to create default/default:
// a pod cannot be created before its namespace's account exists.
func waitDefaultServiceAccount(cs *kubernetes.Clientset) error {
	ctx, cancel := context.WithTimeout(context.Background(), nodeStartTimeout)
	defer cancel()
	for {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("service account default/default: %w (kube-controller-manager creates it)", err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// stop stops every component and undoes the run's changes to the host.
func (n *Node) stop() {
	stopAll := func(names ...string) {
		for i := len(n.procs) - 1; i >= 0; i-- {
			p := n.procs[i]
			for _, name := range names {
				if p.name == name {
					p.stop()
				}
			}
		}
	}
	// The kubelet first, so that it does not restart what the CRI teardown removes.
	stopAll("kube-proxy", "kubelet")
	if n.sock != "" {
		removePodSandboxes(n.sock)
	}
	stopAll("kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd", "containerd")
	teardownNode(n.Dir, n.bins["kube-proxy"], func(string, ...any) {})
	n.unlock()
}
