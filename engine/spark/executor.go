package spark

import (
	"cmp"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Environment of an executor pod, as Spark's Kubernetes backend sets it (what Spark's own
// image's entrypoint reads).
const (
	envDriverURL      = "SPARK_DRIVER_URL"
	envExecutorID     = "SPARK_EXECUTOR_ID"
	envExecutorCores  = "SPARK_EXECUTOR_CORES"
	envExecutorMemory = "SPARK_EXECUTOR_MEMORY"
	envApplicationID  = "SPARK_APPLICATION_ID"
	envExecutorPodIP  = "SPARK_EXECUTOR_POD_IP"
	envExecutorPod    = "SPARK_EXECUTOR_POD_NAME"
	envResourceProf   = "SPARK_RESOURCE_PROFILE_ID"
	envJavaOptPrefix  = "SPARK_JAVA_OPT_"
)

// ExecutorCommand returns the command line (argv, java first) of an executor JVM in a pod that
// Spark's Kubernetes backend created: KubernetesExecutorBackend connecting back to the driver,
// sized and configured by the pod's environment (environ, os.Environ() in a pod), on the
// runner's classpath. It is what Spark's image's entrypoint does for "executor", without a
// shell. A variable the backend always sets that is missing is an error.
func (r Runner) ExecutorCommand(environ []string) ([]string, error) {
	env := map[string]string{}
	var opts []string
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
		if strings.HasPrefix(k, envJavaOptPrefix) {
			opts = append(opts, k)
		}
	}
	for _, k := range []string{envDriverURL, envExecutorID, envExecutorCores, envExecutorMemory, envApplicationID, envExecutorPodIP} {
		if env[k] == "" {
			return nil, fmt.Errorf("run a Spark executor: $%s is not set (is this a pod Spark's Kubernetes backend created?)", k)
		}
	}
	// SPARK_JAVA_OPT_0, _1, ... in numeric order, as the entrypoint sorts them.
	sort.Slice(opts, func(i, j int) bool {
		a, _ := strconv.Atoi(strings.TrimPrefix(opts[i], envJavaOptPrefix))
		b, _ := strconv.Atoi(strings.TrimPrefix(opts[j], envJavaOptPrefix))
		return a < b
	})
	args := []string{r.Java}
	args = append(args, r.jvmOptions()...)
	for _, k := range opts {
		args = append(args, env[k])
	}
	mem := env[envExecutorMemory]
	args = append(args, "-Xms"+mem, "-Xmx"+mem,
		"-cp", r.classpath(),
		"org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend",
		"--driver-url", env[envDriverURL],
		"--executor-id", env[envExecutorID],
		"--cores", env[envExecutorCores],
		"--app-id", env[envApplicationID],
		"--hostname", env[envExecutorPodIP],
		"--resourceProfileId", cmp.Or(env[envResourceProf], "0"),
	)
	if pod := env[envExecutorPod]; pod != "" {
		args = append(args, "--podName", pod)
	}
	return args, nil
}
