package testenv

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// nodeShared is the real node of this test binary, started on first use.
var nodeShared struct {
	mu   sync.Mutex
	node *Node
	err  error
}

// removePodSandboxes stops and removes every pod sandbox through CRI, so that containerd
// runs the CNI teardown (addresses, NAT rules, network namespaces) of each pod.
func removePodSandboxes(sock string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return
	}
	defer conn.Close()
	rs := runtimeapi.NewRuntimeServiceClient(conn)
	list, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return
	}
	for _, sb := range list.Items {
		_, _ = rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id})
		_, _ = rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id})
	}
}

// teardownNode undoes what a node run left in dir and on the host, idempotently: after a
// clean stop it only removes dir; after a crash (the components died with the test binary,
// but containerd's shims and the pods' processes did not) it also kills those, unmounts,
// and removes the chains, bridge, cgroups and sockets. kubeProxy is the kube-proxy binary
// (its --cleanup removes its iptables rules).
func teardownNode(dir, kubeProxy string, logf func(string, ...any)) {
	if _, err := os.Stat(dir); err != nil {
		return
	}
	var st nodeState
	if data, err := os.ReadFile(filepath.Join(dir, "state.json")); err == nil {
		_ = json.Unmarshal(data, &st)
	}
	sock := filepath.Join(dir, "containerd", "containerd.sock")
	// Shims reparent to init when containerd stops; they are ours when they name our socket.
	killProcs(func(cmdline string) bool {
		return strings.Contains(cmdline, "containerd-shim") && strings.Contains(cmdline, sock)
	})
	killCgroupProcs()
	if kubeProxy != "" {
		_ = exec.Command(kubeProxy, "--cleanup").Run()
	}
	for _, m := range mountsUnder(dir + "/") {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
	before := map[string]bool{}
	for _, ns := range st.NetnsBefore {
		before[ns] = true
	}
	for _, m := range mountsUnder("/run/netns/cni-") {
		if name := filepath.Base(m); !before[name] {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
			_ = os.Remove(m)
		}
	}
	before = map[string]bool{}
	for _, s := range st.ShimsBefore {
		before[s] = true
	}
	for _, s := range listDir("/run/containerd/s") {
		if !before[s] {
			_ = os.Remove(filepath.Join("/run/containerd/s", s))
		}
	}
	logsLinks, _ := filepath.Glob("/var/log/containers/*.log")
	for _, l := range logsLinks {
		if target, err := os.Readlink(l); err == nil && strings.HasPrefix(target, dir+"/") {
			_ = os.Remove(l)
		}
	}
	for _, d := range st.HostDirsCreated {
		removeEmptyTree(d)
	}
	_ = exec.Command("ip", "link", "del", nodeBridge).Run()
	cleanIptables()
	removeCgroups()
	if st.IPForward != "" {
		_ = os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte(st.IPForward), 0o644)
	}
	if left := mountsUnder(dir + "/"); len(left) > 0 {
		logf("e2e node: mounts remain under %s (%v); leaving it", dir, left)
		return
	}
	_ = os.RemoveAll(dir)
}

// killProcs sends SIGKILL to every process whose command line (NUL replaced by spaces)
// matches.
func killProcs(match func(cmdline string) bool) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if match(strings.ReplaceAll(string(b), "\x00", " ")) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// kubepodsCgroups are the kubelet's cgroup trees (cgroupfs driver; v1 hierarchies and v2).
func kubepodsCgroups() []string {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	if _, err := os.Stat("/sys/fs/cgroup/kubepods"); err == nil {
		roots = append(roots, "/sys/fs/cgroup/kubepods")
	}
	return roots
}

// killCgroupProcs kills what still runs in the kubelet's cgroups: containers whose shim
// was killed. Only the e2e node runs a kubelet on these machines.
func killCgroupProcs() {
	for _, root := range kubepodsCgroups() {
		_ = filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() || info.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return nil
		})
	}
}

// removeCgroups removes the kubelet's empty cgroup trees, deepest first.
func removeCgroups() {
	for _, root := range kubepodsCgroups() {
		var dirs []string
		_ = filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
			if err == nil && info.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			for try := 0; try < 20; try++ { // a killed process leaves its cgroup a moment later
				if err := syscall.Rmdir(dirs[i]); err == nil || os.IsNotExist(err) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

// mountsUnder lists the mount points that start with prefix, deepest first.
func mountsUnder(prefix string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		if m := unescapeMount(fields[4]); strings.HasPrefix(m, prefix) {
			out = append(out, m)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	return out
}

// unescapeMount decodes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeEmptyTree removes dir when nothing but folders, sockets and symbolic links is left
// in it (what the components leave behind), and leaves it otherwise.
func removeEmptyTree(dir string) {
	keep := false
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			keep = true
		}
		return nil
	})
	if !keep {
		_ = os.RemoveAll(dir)
	}
}

// cleanIptables removes the kubelet's chains (KUBE-FIREWALL drops non-loopback packets to
// 127/8; kube-proxy --cleanup leaves it) and the NAT rules the CNI bridge plugin made for
// pods whose teardown never ran, which carry the network's name in their comment.
func cleanIptables() {
	for _, ipt := range []string{"iptables", "ip6tables"} {
		if _, err := exec.LookPath(ipt); err != nil {
			continue
		}
		run := func(args ...string) error { return exec.Command(ipt, args...).Run() }
		_ = run("-D", "INPUT", "-j", "KUBE-FIREWALL")
		_ = run("-D", "OUTPUT", "-j", "KUBE-FIREWALL")
		if run("-F", "KUBE-FIREWALL") == nil {
			_ = run("-X", "KUBE-FIREWALL")
		}
		for _, table := range []string{"mangle", "nat", "filter"} {
			if run("-t", table, "-F", "KUBE-KUBELET-CANARY") == nil {
				_ = run("-t", table, "-X", "KUBE-KUBELET-CANARY")
			}
		}
		_ = run("-t", "mangle", "-X", "KUBE-IPTABLES-HINT")
	}
	out, err := exec.Command("iptables-save", "-t", "nat").Output()
	if err != nil {
		return
	}
	tag := `name: \"` + nodeCNIName + `\"`
	var chains []string
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, "-A POSTROUTING ") || !strings.Contains(line, tag) {
			continue
		}
		args := splitRule(strings.TrimPrefix(line, "-A "))
		_ = exec.Command("iptables", append([]string{"-t", "nat", "-D"}, args...)...).Run()
		for i, a := range args {
			if a == "-j" && i+1 < len(args) && strings.HasPrefix(args[i+1], "CNI-") {
				chains = append(chains, args[i+1])
			}
		}
	}
	for _, c := range chains {
		if exec.Command("iptables", "-t", "nat", "-F", c).Run() == nil {
			_ = exec.Command("iptables", "-t", "nat", "-X", c).Run()
		}
	}
}

// splitRule splits an iptables-save rule into arguments: words, or double-quoted strings
// with backslash escapes.
func splitRule(s string) []string {
	var (
		args   []string
		cur    strings.Builder
		quoted bool
		inWord bool
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quoted && c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case c == '"':
			quoted, inWord = !quoted, true
		case c == ' ' && !quoted:
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		args = append(args, cur.String())
	}
	return args
}
