package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// Waits of the Lease test, named once.
const (
	// collectedWithin bounds the garbage collector's deletion of a Lease whose owner went
	// (its start, discovery of every resource, then the deletion).
	collectedWithin = 90 * time.Second
	leaseTick       = 100 * time.Millisecond
)

// TestLeaseGoesWithUninstall reproduces `helm uninstall` followed by `helm install` against a
// real API server, with the real helm and the chart: the controller's manager (newManager,
// as `lockstep controller --leader-elect` makes it) runs as the chart's ServiceAccount
// (impersonated, UID included, as its token authenticates it) with the chart's RBAC.
//
// helm uninstall deletes the Deployment, the RBAC and the ServiceAccount in one pass, so
// the leader's release on SIGTERM is refused (in a cluster its token also dies with the
// ServiceAccount): the Lease stays and names the deleted leader. The Lease belongs to the
// ServiceAccount, though: the next installation's controller sees it owned by an earlier
// account of its account's name, clears the holder and leads at once; a clean stop releases
// it; and the garbage collector deletes it with the ServiceAccount that owns it.
func TestLeaseGoesWithUninstall(t *testing.T) {
	cfg := testenv.ControlPlane(t)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := fmt.Sprintf("lease-%d", time.Now().UnixNano()%100000)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h := &helmCLI{bin: testenv.Tool(t, "helm"), kubeconfig: testenv.WriteKubeconfig(t, cfg), home: t.TempDir()}
	const release = "lease"
	sa := release + "-lockstep-controller" // the chart's ServiceAccount
	t.Cleanup(func() { _, _ = h.run("uninstall", release, "--namespace", ns, "--ignore-not-found") })
	leases := cs.CoordinationV1().Leases(ns)

	// The first installation; its controller leads and owns the Lease through its account.
	h.must(t, "install", release, "../../charts/lockstep", "--namespace", ns)
	first := account(t, cs, ns, sa)
	stop := startController(t, cfg, first)
	lease, err := leases.Get(ctx, leaderElectionID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]metav1.OwnerReference{ownerRef(first)}, lease.OwnerReferences); diff != "" {
		t.Errorf("Lease owners (-want +got):\n%s", diff)
	}
	holder := ptrValue(lease.Spec.HolderIdentity)
	if holder == "" {
		t.Fatal("the elected controller's Lease names no holder")
	}

	// The cause: helm uninstall takes the leader's rights with the Deployment, so its release
	// on stopping is refused and the Lease names a leader that is gone.
	h.must(t, "uninstall", release, "--namespace", ns)
	stop()
	lease, err = leases.Get(ctx, leaderElectionID, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Lease after uninstall: %v", err)
	}
	if got := ptrValue(lease.Spec.HolderIdentity); got != holder {
		t.Fatalf("after uninstall the Lease names %q, want the stopped leader %q (its release refused): the cause is not reproduced", got, holder)
	}

	// The next installation leads at once: the Lease's owner is an earlier account of the
	// same name, whose holder's token is dead. "At once" is judged by the mechanism, not a
	// wall clock: it takes the Lease before the stale one would have expired.
	staleUntil := lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
	h.must(t, "install", release, "../../charts/lockstep", "--namespace", ns)
	second := account(t, cs, ns, sa)
	stop = startController(t, cfg, second)
	lease, err = leases.Get(ctx, leaderElectionID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if acquired := lease.Spec.AcquireTime; acquired == nil || !acquired.Time.Before(staleUntil) {
		t.Errorf("the next installation took the Lease at %v, not before the stale one expired at %v: it waited it out", acquired, staleUntil)
	}
	if diff := cmp.Diff([]metav1.OwnerReference{ownerRef(second)}, lease.OwnerReferences); diff != "" {
		t.Errorf("Lease owners after the reinstall (-want +got):\n%s", diff)
	}
	if got := ptrValue(lease.Spec.HolderIdentity); got == "" || got == holder {
		t.Errorf("after the reinstall the Lease names %q, want the new leader", got)
	}

	// A clean stop, rights in place, releases the Lease.
	stop()
	if lease, err = leases.Get(ctx, leaderElectionID, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if got := ptrValue(lease.Spec.HolderIdentity); got != "" {
		t.Errorf("after a clean stop the Lease names %q, want it released", got)
	}

	// The Lease goes with the ServiceAccount that owns it.
	h.must(t, "uninstall", release, "--namespace", ns)
	testenv.KubeControllerManager(t, h.kubeconfig, "garbagecollector")
	deadline := time.Now().Add(collectedWithin)
	for {
		_, err := leases.Get(ctx, leaderElectionID, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after the uninstall the Lease is still there (%v), want it deleted with ServiceAccount %s", collectedWithin, err, sa)
		}
		time.Sleep(leaseTick)
	}
}

// TestLeaseOwners: the owner is added once; an earlier ServiceAccount of its name (deleted
// and made again) is replaced, and says so; other owners stay.
func TestLeaseOwners(t *testing.T) {
	sa := func(name, uid string) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "v1", Kind: "ServiceAccount", Name: name, UID: types.UID(uid)}
	}
	other := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "lockstep-controller", UID: "d"}
	owner := sa("lockstep-controller", "new")
	for _, tc := range []struct {
		name             string
		refs, want       []metav1.OwnerReference
		earlier, changed bool
	}{
		{"none", nil, []metav1.OwnerReference{owner}, false, true},
		{"owned", []metav1.OwnerReference{owner}, []metav1.OwnerReference{owner}, false, false},
		{"earlier account", []metav1.OwnerReference{sa("lockstep-controller", "old")}, []metav1.OwnerReference{owner}, true, true},
		{"another account", []metav1.OwnerReference{sa("other", "o")}, []metav1.OwnerReference{sa("other", "o"), owner}, false, true},
		{"other kind", []metav1.OwnerReference{other}, []metav1.OwnerReference{other, owner}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, earlier, changed := leaseOwners(tc.refs, owner)
			if diff := cmp.Diff(tc.want, got); diff != "" || earlier != tc.earlier || changed != tc.changed {
				t.Errorf("leaseOwners = earlier %v, changed %v, want %v, %v; owners (-want +got):\n%s", earlier, changed, tc.earlier, tc.changed, diff)
			}
		})
	}
}

// startController starts the controller's manager as ServiceAccount sa and waits until it
// leads; the returned function stops it and waits for it to end (its release included).
func startController(t *testing.T, cfg *rest.Config, sa *corev1.ServiceAccount) (stop func()) {
	t.Helper()
	asSA := rest.CopyConfig(cfg)
	asSA.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + sa.Namespace + ":" + sa.Name, UID: string(sa.UID)}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("controller logs as %s (UID %s):\n%s", sa.Name, sa.UID, logs.String())
		}
	})
	log := logr.FromSlogHandler(slog.NewTextHandler(logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := newManager(ctx, asSA, controllerConfig{
		leaderElect: true, leaderElectionNamespace: sa.Namespace, metricsAddr: "0", probeAddr: "0",
	}, scheme, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("controller as %s: %v", sa.Name, err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case <-mgr.Elected():
	case err := <-done:
		t.Fatalf("controller as %s ended before leading: %v", sa.Name, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("controller as %s did not lead within 30s", sa.Name)
	}
	return stop
}

// account reads a ServiceAccount.
func account(t *testing.T, cs kubernetes.Interface, namespace, name string) *corev1.ServiceAccount {
	t.Helper()
	sa, err := cs.CoreV1().ServiceAccounts(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart's ServiceAccount: %v", err)
	}
	return sa
}

func ownerRef(sa *corev1.ServiceAccount) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "ServiceAccount", Name: sa.Name, UID: sa.UID}
}

func ptrValue(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// helmCLI runs the cached helm against the test's control plane, with a throwaway home.
type helmCLI struct {
	bin, kubeconfig, home string
}

func (h *helmCLI) run(args ...string) ([]byte, error) {
	cmd := exec.Command(h.bin, args...)
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+h.kubeconfig), testenv.HelmHome(h.home)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("helm %v: %w\n%s", args, err, out)
	}
	return out, nil
}

func (h *helmCLI) must(t *testing.T, args ...string) {
	t.Helper()
	if _, err := h.run(args...); err != nil {
		t.Fatal(err)
	}
}
