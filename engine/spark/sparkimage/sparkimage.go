// Package sparkimage builds Lockstep's Spark image without Docker or a registry: the lockstep
// binary, a headless Java 17 runtime with the shared libraries it loads (Debian packages), and
// the Spark runner with its jars and Spark's Kubernetes backend, from the tools cache that
// hack/tools.sh (steps spark and spark_image) fills. `make image-spark` (hack/image-spark) and
// the end-to-end suite use it.
//
// # Layout
//
// Four layers, the ones that change least first, so that a new lockstep binary only adds a
// small layer: the Java runtime (/usr/lib/jvm, /lib, /usr/lib) and /bin/rm, the runner's jars
// (/opt/spark/libs), Spark's Kubernetes jars (/opt/spark/libs), then the runner jar
// (/opt/spark) and /lockstep. JAVA_HOME and LOCKSTEP_SPARK_RUNNER point the engine at them;
// PATH holds /bin for rm, which Spark runs to delete its temporary folders
// (JavaUtils.deleteRecursively runs `rm -rf`, and logs an IOException when it cannot).
package sparkimage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	ocispec "github.com/google/go-containerregistry/pkg/v1"

	"github.com/lockstep-dev/lockstep/engine/spark"
	"github.com/lockstep-dev/lockstep/internal/gobuild"
	"github.com/lockstep-dev/lockstep/internal/ociimage"
)

// Paths inside the image.
const (
	JavaHome  = "/usr/lib/jvm/java-17-openjdk-amd64"
	RunnerDir = "/opt/spark"
)

// Options say what to build.
type Options struct {
	// Root is the module's folder (the checkout); required.
	Root string
	// Ref tags the tarball, e.g. ghcr.io/lockstep-dev/lockstep-spark:v1.2.3; required.
	Ref string
	// Version is linked into the binary (lockstep version). Default "dev".
	Version string
	// Out is the tarball to write; required.
	Out string
	// Tools is the tools cache. Default $LOCKSTEP_TOOLS, else $HOME/.cache/lockstep/tools.
	Tools string
}

// ErrNoInputs means the tools cache lacks the image's inputs; `make tools` (hack/tools.sh
// spark_image) fetches them.
var ErrNoInputs = fmt.Errorf("the Spark image's inputs are not in the tools cache: run `make tools` (hack/tools.sh spark_image)")

// Write builds the image and writes it to o.Out, returning its digest.
func Write(ctx context.Context, o Options) (ocispec.Hash, error) {
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Tools == "" {
		o.Tools = toolsDir()
	}
	runner := filepath.Join(o.Tools, "spark-"+spark.Version)
	inputs := filepath.Join(o.Tools, "spark-image-"+spark.Version)
	for _, p := range []string{filepath.Join(runner, "lockstep-spark-runner.jar"), filepath.Join(runner, "libs"),
		filepath.Join(inputs, "rootfs", JavaHome[1:], "bin", "java"), filepath.Join(inputs, "rootfs", "bin", "rm"), filepath.Join(inputs, "k8s-libs")} {
		if _, err := os.Stat(p); err != nil {
			return ocispec.Hash{}, fmt.Errorf("%w: %w", ErrNoInputs, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(o.Out), 0o755); err != nil {
		return ocispec.Hash{}, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(o.Out), ".sparkimage-")
	if err != nil {
		return ocispec.Hash{}, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "lockstep")
	if err := gobuild.Static(ctx, o.Root, "./cmd/lockstep", bin, "-X main.version="+o.Version); err != nil {
		return ocispec.Hash{}, err
	}
	jar := filepath.Join(tmp, "runner")
	if err := os.MkdirAll(jar, 0o755); err != nil {
		return ocispec.Hash{}, err
	}
	if err := os.Link(filepath.Join(runner, "lockstep-spark-runner.jar"), filepath.Join(jar, "lockstep-spark-runner.jar")); err != nil {
		data, err := os.ReadFile(filepath.Join(runner, "lockstep-spark-runner.jar"))
		if err != nil {
			return ocispec.Hash{}, err
		}
		if err := os.WriteFile(filepath.Join(jar, "lockstep-spark-runner.jar"), data, 0o644); err != nil {
			return ocispec.Hash{}, err
		}
	}
	return ociimage.Write(ociimage.Spec{
		Ref: o.Ref, Binary: bin, Entrypoint: "/lockstep", CACertificates: true,
		Trees: []ociimage.Tree{
			{Src: filepath.Join(inputs, "rootfs"), Dest: "/"},
			{Src: filepath.Join(runner, "libs"), Dest: RunnerDir + "/libs"},
			{Src: filepath.Join(inputs, "k8s-libs"), Dest: RunnerDir + "/libs"},
			{Src: jar, Dest: RunnerDir},
		},
		Env: []string{
			"PATH=" + JavaHome + "/bin:/bin:/",
			"JAVA_HOME=" + JavaHome,
			spark.EnvRunnerDir + "=" + RunnerDir,
		},
		Labels: map[string]string{
			"org.opencontainers.image.source":  "https://github.com/lockstep-dev/lockstep",
			"org.opencontainers.image.version": o.Version,
			"org.opencontainers.image.title":   "Lockstep with Apache Spark " + spark.Version,
		},
	}, o.Out)
}

func toolsDir() string {
	if d := os.Getenv("LOCKSTEP_TOOLS"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "lockstep-tools")
	}
	return filepath.Join(home, ".cache", "lockstep", "tools")
}
