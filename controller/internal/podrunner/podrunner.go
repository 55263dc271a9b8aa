// Package podrunner runs engine pods as local processes, for tests: no kubelet runs on the
// machines that test Lockstep, so Runner plays the parts of the Deployment controller and
// the kubelet for the engine Deployments the controller creates. For each Deployment with
// replicas it creates a Pod object like the template, starts the template's command as a
// process of a given binary (same arguments and environment, Secret references resolved,
// the ConfigMap volume written to a folder, the termination message file mapped), reports
// the container's state in the Pod's status (readiness from the engine's /readyz, restarts,
// termination message) and restarts the process when it exits. When the template changes
// (Recreate) or replicas drop to 0 or the Deployment goes, it stops the process with SIGTERM,
// waits for it to exit, then deletes the Pod, as the Recreate strategy does.
package podrunner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-dev/lockstep/controller"
)

// Timing of the runner.
const (
	poll         = 200 * time.Millisecond
	restartDelay = time.Second
	stopTimeout  = 30 * time.Second
)

// Runner runs the engine pods of one namespace. Run drives it until its context ends, then
// stops every process.
type Runner struct {
	c         client.Client
	binary    string
	dir       string
	namespace string

	procs map[types.NamespacedName]*proc // by Deployment; only Run's goroutine touches it
}

// New returns a runner for the engine Deployments in namespace that runs binary (a built
// lockstep) in place of the image, with its files under dir.
func New(c client.Client, binary, dir, namespace string) *Runner {
	return &Runner{c: c, binary: binary, dir: dir, namespace: namespace, procs: map[types.NamespacedName]*proc{}}
}

// proc is one running (or restarting) engine pod.
type proc struct {
	pod      string
	hash     string
	folder   string
	termPath string
	health   string // host:port of /readyz
	logPath  string
	cmd      *exec.Cmd
	done     chan struct{}
	exitCode int
	restarts int32
	last     *corev1.ContainerStateTerminated
	ready    bool
	// restartAt is when to start the process again after it exited; zero while it runs.
	restartAt time.Time
	spec      corev1.PodSpec
	env       []string
	args      []string
}

// Run reconciles the namespace's engine Deployments every poll until ctx ends, then stops
// every process it started. It returns ctx's error.
func (r *Runner) Run(ctx context.Context) error {
	t := time.NewTicker(poll)
	defer t.Stop()
	defer r.stopAll()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if err := r.sync(ctx); err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "podrunner: %v\n", err)
		}
	}
}

// Logs returns the output of the processes of a Deployment's pods, for test failures.
func (r *Runner) Logs(deployment string) string {
	var b strings.Builder
	matches, _ := filepath.Glob(filepath.Join(r.dir, deployment+"-*", "log"))
	for _, m := range matches {
		data, _ := os.ReadFile(m)
		fmt.Fprintf(&b, "==> %s\n%s\n", m, data)
	}
	return b.String()
}

func (r *Runner) sync(ctx context.Context) error {
	var ds appsv1.DeploymentList
	if err := r.c.List(ctx, &ds, client.InNamespace(r.namespace), client.MatchingLabels{controller.LabelComponent: "engine"}); err != nil {
		return err
	}
	seen := map[types.NamespacedName]bool{}
	for i := range ds.Items {
		d := &ds.Items[i]
		key := client.ObjectKeyFromObject(d)
		seen[key] = true
		want := d.DeletionTimestamp == nil && (d.Spec.Replicas == nil || *d.Spec.Replicas > 0)
		hash := d.Spec.Template.Annotations[controller.AnnotationSpecHash] + "-" + d.Annotations["streaming.lockstep.dev/template-hash"]
		p := r.procs[key]
		if p != nil && (!want || p.hash != hash) {
			if err := r.stop(ctx, key, p); err != nil {
				return err
			}
			p = nil
		}
		if want && p == nil {
			if err := r.start(ctx, d, hash); err != nil {
				return err
			}
			continue
		}
		if p != nil {
			if err := r.tend(ctx, d, p); err != nil {
				return err
			}
		}
	}
	for key, p := range r.procs {
		if !seen[key] {
			if err := r.stop(ctx, key, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// start creates the pod of d's template and starts its process.
func (r *Runner) start(ctx context.Context, d *appsv1.Deployment, hash string) error {
	tmpl := d.Spec.Template
	name := d.Name + "-" + strings.ReplaceAll(hash, "-", "")[:10]
	folder := filepath.Join(r.dir, name)
	if err := os.MkdirAll(folder, 0o755); err != nil {
		return err
	}
	p := &proc{pod: name, hash: hash, folder: folder, termPath: filepath.Join(folder, "termination-log"), logPath: filepath.Join(folder, "log"), spec: tmpl.Spec}
	c := tmpl.Spec.Containers[0]
	mounts, err := r.mountVolumes(ctx, d, folder)
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	p.health = fmt.Sprintf("127.0.0.1:%d", port)
	// mapPath maps a container path at the start of a value (or of a --flag=value) to
	// its local folder, once.
	mapPath := func(s string) string {
		prefix, v := "", s
		if strings.HasPrefix(s, "--") {
			if flag, val, ok := strings.Cut(s, "="); ok {
				prefix, v = flag+"=", val
			}
		}
		if c.TerminationMessagePath != "" && v == c.TerminationMessagePath {
			return prefix + p.termPath
		}
		for mp, local := range mounts {
			if v == mp || strings.HasPrefix(v, mp+"/") {
				return prefix + local + strings.TrimPrefix(v, mp)
			}
		}
		return s
	}
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--health-addr=") {
			a = "--health-addr=" + p.health
		}
		p.args = append(p.args, mapPath(a))
	}
	p.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + folder, "TMPDIR=" + mounts["/tmp"]}
	for _, e := range c.Env {
		val := e.Value
		if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
			var sec corev1.Secret
			if err := r.c.Get(ctx, types.NamespacedName{Namespace: d.Namespace, Name: ref.SecretKeyRef.Name}, &sec); err != nil {
				return fmt.Errorf("env %s: %w", e.Name, err)
			}
			val = string(sec.Data[ref.SecretKeyRef.Key])
		}
		p.env = append(p.env, e.Name+"="+mapPath(val))
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: d.Namespace, Labels: tmpl.Labels, Annotations: tmpl.Annotations},
		Spec:       tmpl.Spec,
	}
	if err := r.c.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create pod %s: %w", name, err)
	}
	if err := p.exec(r.binary); err != nil {
		return err
	}
	r.procs[client.ObjectKeyFromObject(d)] = p
	return r.report(ctx, d.Namespace, p)
}

// mountVolumes makes a local folder under folder for each volume that d's container mounts,
// filled with the data of a ConfigMap volume, and returns the folders by mount path.
func (r *Runner) mountVolumes(ctx context.Context, d *appsv1.Deployment, folder string) (map[string]string, error) {
	tmpl := d.Spec.Template
	mounts := map[string]string{} // mount path → local folder
	for _, m := range tmpl.Spec.Containers[0].VolumeMounts {
		local := filepath.Join(folder, "volumes", m.Name)
		if err := os.MkdirAll(local, 0o755); err != nil {
			return nil, err
		}
		mounts[m.MountPath] = local
		for _, v := range tmpl.Spec.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil {
				continue
			}
			var cm corev1.ConfigMap
			if err := r.c.Get(ctx, types.NamespacedName{Namespace: d.Namespace, Name: v.ConfigMap.Name}, &cm); err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			for k, val := range cm.Data {
				if err := os.WriteFile(filepath.Join(local, k), []byte(val), 0o644); err != nil {
					return nil, err
				}
			}
		}
	}
	return mounts, nil
}

// exec starts the process.
func (p *proc) exec(binary string) error {
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_ = os.Remove(p.termPath)
	c := p.spec.Containers[0]
	cmd := exec.Command(binary, append(c.Command[1:], p.args...)...)
	cmd.Env = p.env
	cmd.Dir = p.folder
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start %s: %w", binary, err)
	}
	p.cmd, p.done, p.ready, p.restartAt = cmd, make(chan struct{}), false, time.Time{}
	go func() {
		_ = cmd.Wait()
		log.Close()
		p.exitCode = cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	return nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tend checks a process: readiness while it runs, its exit and restart otherwise.
func (r *Runner) tend(ctx context.Context, d *appsv1.Deployment, p *proc) error {
	switch {
	case !p.exited():
		ready := probe(p.health)
		if ready == p.ready {
			return nil
		}
		p.ready = ready
	case p.restartAt.IsZero():
		msg, _ := os.ReadFile(p.termPath)
		p.last = &corev1.ContainerStateTerminated{ExitCode: int32(p.exitCode), Message: string(msg), Reason: reason(p.exitCode), FinishedAt: metav1.Now()}
		p.ready = false
		p.restartAt = time.Now().Add(restartDelay)
	case time.Now().After(p.restartAt):
		p.restarts++
		if err := p.exec(r.binary); err != nil {
			return err
		}
	default:
		return nil
	}
	return r.report(ctx, d.Namespace, p)
}

// report writes the pod's status as the kubelet would.
func (r *Runner) report(ctx context.Context, namespace string, p *proc) error {
	var pod corev1.Pod
	if err := r.c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: p.pod}, &pod); err != nil {
		return client.IgnoreNotFound(err)
	}
	cs := corev1.ContainerStatus{Name: controller.EngineContainer, Ready: p.ready, RestartCount: p.restarts, Image: p.spec.Containers[0].Image}
	last := p.last
	if last == nil && p.exited() {
		// It exited after tend looked, before its exit was recorded (an engine that
		// ends before its first report): report the exit code, the message comes next.
		last = &corev1.ContainerStateTerminated{ExitCode: int32(p.exitCode), Reason: reason(p.exitCode), FinishedAt: metav1.Now()}
	}
	cs.LastTerminationState.Terminated = last
	switch {
	case !p.exited():
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.Now()}
	case last.ExitCode == 0:
		cs.State.Terminated, cs.LastTerminationState.Terminated = last, nil
	default:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: last.Message}
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	return client.IgnoreNotFound(r.c.Status().Update(ctx, &pod))
}

// stop ends the process with SIGTERM (SIGKILL after the timeout) and deletes its pod.
func (r *Runner) stop(ctx context.Context, key types.NamespacedName, p *proc) error {
	if !p.exited() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopTimeout):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	delete(r.procs, key)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: p.pod}}
	if err := r.c.Delete(ctx, pod, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete pod %s: %w", p.pod, err)
	}
	return nil
}

func (r *Runner) stopAll() {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	for key, p := range r.procs {
		_ = r.stop(ctx, key, p)
	}
}

func reason(code int) string {
	if code == 0 {
		return "Completed"
	}
	return "Error"
}

func probe(addr string) bool {
	cl := http.Client{Timeout: time.Second}
	resp, err := cl.Get("http://" + addr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, errors.New("find a free port: " + err.Error())
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
