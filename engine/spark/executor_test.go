package spark

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestExecutorCommand builds the executor JVM's command line from the environment Spark's
// Kubernetes backend gives an executor pod: Java options in SPARK_JAVA_OPT_ order after
// Lockstep's module openings, the heap from SPARK_EXECUTOR_MEMORY, the backend's arguments.
func TestExecutorCommand(t *testing.T) {
	r := Runner{Java: "/jre/bin/java", Dir: "/opt/spark"}
	env := []string{
		"SPARK_DRIVER_URL=spark://CoarseGrainedScheduler@10.0.0.5:7078",
		"SPARK_EXECUTOR_ID=2", "SPARK_EXECUTOR_CORES=1", "SPARK_EXECUTOR_MEMORY=512m",
		"SPARK_APPLICATION_ID=spark-app-1", "SPARK_EXECUTOR_POD_IP=10.0.0.7",
		"SPARK_EXECUTOR_POD_NAME=q-exec-2", "SPARK_RESOURCE_PROFILE_ID=0",
		"SPARK_JAVA_OPT_10=-Dten", "SPARK_JAVA_OPT_2=-Dtwo", "AWS_SECRET_ACCESS_KEY=never-an-argument",
	}
	argv, err := r.ExecutorCommand(env)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(argv, " ")
	for _, want := range []string{"/jre/bin/java ", "-Dtwo -Dten -Xms512m -Xmx512m", "-cp /opt/spark/lockstep-spark-runner.jar:/opt/spark/libs/*",
		"org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend --driver-url spark://CoarseGrainedScheduler@10.0.0.5:7078 --executor-id 2 --cores 1 --app-id spark-app-1 --hostname 10.0.0.7 --resourceProfileId 0 --podName q-exec-2"} {
		if !strings.Contains(line, want) {
			t.Errorf("command line\n%s\nlacks %q", line, want)
		}
	}
	if slices.ContainsFunc(argv, func(a string) bool { return strings.Contains(a, "never-an-argument") }) {
		t.Errorf("a secret of the environment is on the command line: %s", line)
	}
	if _, err := r.ExecutorCommand(env[1:]); err == nil || !strings.Contains(err.Error(), "SPARK_DRIVER_URL") {
		t.Errorf("without the driver's URL: err = %v, want one naming SPARK_DRIVER_URL", err)
	}
}

// TestDriverCommand: the driver's JVM gets the heap of its sizing, Lockstep's module openings,
// then the options of spark.driver.extraJavaOptions, which Spark itself cannot apply to a JVM
// already running.
func TestDriverCommand(t *testing.T) {
	r := Runner{Java: "/jre/bin/java", Dir: "/opt/spark"}
	line := strings.Join(r.Command("/tmp/plan.json", 640<<20, "-XX:TieredStopAtLevel=1", "-Dx=y").Args, " ")
	for _, want := range []string{"/jre/bin/java -Xmx640m -XX:+IgnoreUnrecognizedVMOptions", "-Dio.netty.tryReflectionSetAccessible=true -XX:TieredStopAtLevel=1 -Dx=y -cp ", " dev.lockstep.spark.Runner /tmp/plan.json"} {
		if !strings.Contains(line, want) {
			t.Errorf("command line\n%s\nlacks %q", line, want)
		}
	}
}

// TestClassArchive: a class-data archive beside the runner jar goes to every JVM on the
// runner's classpath, before the query's own options (which may turn it off: -Xshare:off).
func TestClassArchive(t *testing.T) {
	r := Runner{Java: "/jre/bin/java", Dir: t.TempDir()}
	driver := func() string { return strings.Join(r.Command("/tmp/plan.json", 640<<20, "-Xshare:off").Args, " ") }
	if line := driver(); strings.Contains(line, "SharedArchiveFile") {
		t.Errorf("no archive, yet the command line names one:\n%s", line)
	}
	archive := filepath.Join(r.Dir, ClassArchive)
	if err := os.WriteFile(archive, []byte("jsa"), 0o644); err != nil {
		t.Fatal(err)
	}
	if want := "-XX:SharedArchiveFile=" + archive + " -Xshare:off -cp "; !strings.Contains(driver(), want) {
		t.Errorf("driver command line\n%s\nlacks %q", driver(), want)
	}
	args, err := r.ExecutorCommand([]string{envDriverURL + "=d", envExecutorID + "=1", envExecutorCores + "=1", envExecutorMemory + "=1g", envApplicationID + "=a", envExecutorPodIP + "=10.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(args, "-XX:SharedArchiveFile="+archive) {
		t.Errorf("executor command line %q lacks the archive", args)
	}
}
