package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WriteKubeconfig writes a kubeconfig with cfg's address and credentials into a folder of
// the test's and returns its path, for tools that take one (helm, kube-controller-manager).
func WriteKubeconfig(t testing.TB, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// KubeControllerManager runs kube-controller-manager from the tool cache against the
// control plane of kubeconfig with only the named controllers (comma-separated, as its
// --controllers flag: "garbagecollector", "clusterrole-aggregation"), until the test ends.
// envtest runs none, so a test that needs one (the garbage collector, or the aggregation
// that fills the built-in edit and view roles) starts it. The tail of its log is logged
// when the test fails.
func KubeControllerManager(t testing.TB, kubeconfig, controllers string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "kube-controller-manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(Tool(t, "kube-controller-manager"), "--kubeconfig", kubeconfig,
		"--controllers="+controllers, "--leader-elect=false", "--secure-port=0")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start kube-controller-manager: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logFile.Close()
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			if len(out) > 4000 {
				out = out[len(out)-4000:]
			}
			t.Logf("kube-controller-manager log:\n%s", out)
		}
	})
	select {
	case err := <-exited:
		exited <- err
		t.Fatalf("kube-controller-manager exited at once (%v); its log follows", err)
	case <-time.After(time.Second):
	}
}
