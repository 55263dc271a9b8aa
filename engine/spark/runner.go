package spark

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
)

// Version is the Spark version the runner is built for (hack/versions.env SPARK_VERSION).
const Version = "4.2.0"

// Runner is a built Spark runner: a java binary and the runner's classpath, as `make tools`
// (hack/tools.sh spark) caches them in $LOCKSTEP_TOOLS/spark-<version>/.
type Runner struct {
	// Java is the java binary (17 or later).
	Java string
	// Dir holds lockstep-spark-runner.jar and libs/.
	Dir string
}

// ErrNoRunner means the Spark runner is not built; `make tools` builds it.
var ErrNoRunner = errors.New("the Spark runner is not built: run `make tools` (hack/tools.sh spark)")

// EnvRunnerDir names the folder that holds the runner (lockstep-spark-runner.jar and libs/)
// when it is not in the tools cache: Lockstep's Spark image sets it (hack/image-spark).
const EnvRunnerDir = "LOCKSTEP_SPARK_RUNNER"

// FindRunner finds the runner in $LOCKSTEP_SPARK_RUNNER, else in the tools cache
// ($LOCKSTEP_TOOLS, default $HOME/.cache/lockstep/tools), and java in $JAVA_HOME/bin, else
// in the tools cache, else on PATH.
func FindRunner() (Runner, error) {
	if dir := os.Getenv(EnvRunnerDir); dir != "" {
		r := Runner{Dir: dir, Java: filepath.Join(os.Getenv("JAVA_HOME"), "bin", "java")}
		if _, err := os.Stat(filepath.Join(dir, "lockstep-spark-runner.jar")); err != nil {
			return Runner{}, fmt.Errorf("%w: $%s=%s has no lockstep-spark-runner.jar", ErrNoRunner, EnvRunnerDir, dir)
		}
		if os.Getenv("JAVA_HOME") == "" {
			java, err := exec.LookPath("java")
			if err != nil {
				return Runner{}, fmt.Errorf("%w: no $JAVA_HOME and no java on PATH", ErrNoRunner)
			}
			r.Java = java
		}
		return r, nil
	}
	tools := os.Getenv("LOCKSTEP_TOOLS")
	if tools == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return Runner{}, fmt.Errorf("find the Spark runner: %w", err)
		}
		tools = filepath.Join(home, ".cache", "lockstep", "tools")
	}
	r := Runner{Dir: filepath.Join(tools, "spark-"+Version)}
	if _, err := os.Stat(filepath.Join(r.Dir, "lockstep-spark-runner.jar")); err != nil {
		return Runner{}, fmt.Errorf("%w: %s has no lockstep-spark-runner.jar", ErrNoRunner, r.Dir)
	}
	r.Java = filepath.Join(tools, "bin", "java")
	if _, err := os.Stat(r.Java); err != nil {
		if r.Java, err = exec.LookPath("java"); err != nil {
			return Runner{}, fmt.Errorf("%w: no java in %s/bin or on PATH", ErrNoRunner, tools)
		}
	}
	return r, nil
}

// javaOptions are the module openings Spark's launcher adds on Java 17 (Spark's
// JavaModuleOptions): Spark reaches into these JDK internals.
var javaOptions = []string{
	"-XX:+IgnoreUnrecognizedVMOptions",
	"--add-modules=jdk.incubator.vector",
	"--add-opens=java.base/java.lang=ALL-UNNAMED",
	"--add-opens=java.base/java.lang.invoke=ALL-UNNAMED",
	"--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
	"--add-opens=java.base/java.io=ALL-UNNAMED",
	"--add-opens=java.base/java.net=ALL-UNNAMED",
	"--add-opens=java.base/java.nio=ALL-UNNAMED",
	"--add-opens=java.base/java.util=ALL-UNNAMED",
	"--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
	"--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
	"--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
	"--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
	"--add-opens=java.base/sun.nio.cs=ALL-UNNAMED",
	"--add-opens=java.base/sun.security.action=ALL-UNNAMED",
	"--add-opens=java.base/sun.util.calendar=ALL-UNNAMED",
	"--add-opens=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
	"-Djdk.reflect.useDirectMethodHandle=false",
	"-Dio.netty.tryReflectionSetAccessible=true",
}

// ClassArchive names the class-data archive (a JDK CDS archive) that may lie beside the
// runner jar: the JVMs the runner starts map the classes it holds instead of loading and
// verifying them from the jars (a small query's driver: ~35% less CPU, 3 s sooner). Only the
// java that made it can use it, on this very classpath (`java -XX:ArchiveClassesAtExit=...`;
// internal/testenv makes the tools cache's); a stale one is ignored with a warning.
const ClassArchive = "lockstep-spark-runner.jsa"

// jvmOptions are Lockstep's JVM options for a JVM on the runner's classpath: javaOptions,
// and the class-data archive when there is one.
func (r Runner) jvmOptions() []string {
	opts := slices.Clone(javaOptions)
	if archive := filepath.Join(r.Dir, ClassArchive); isFile(archive) {
		opts = append(opts, "-XX:SharedArchiveFile="+archive)
	}
	return opts
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// classpath is the runner's classpath: its jar, then Spark's.
func (r Runner) classpath() string {
	return filepath.Join(r.Dir, "lockstep-spark-runner.jar") + string(os.PathListSeparator) + filepath.Join(r.Dir, "libs", "*")
}

// Command returns the command that runs the runner on a plan file with a heap of heapBytes
// and the extra JVM options opts (spark.driver.extraJavaOptions), which come after Lockstep's.
func (r Runner) Command(planPath string, heapBytes int64, opts ...string) *exec.Cmd {
	args := []string{"-Xmx" + strconv.FormatInt(max(heapBytes>>20, 128), 10) + "m"}
	args = append(args, r.jvmOptions()...)
	args = append(args, opts...)
	args = append(args, "-cp", r.classpath(), "dev.lockstep.spark.Runner", planPath)
	return exec.Command(r.Java, args...)
}
