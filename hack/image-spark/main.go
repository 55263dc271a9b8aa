// Command image-spark builds Lockstep's Spark image from this checkout and the tools cache,
// without Docker or a registry: the lockstep binary (the entrypoint: `lockstep engine` runs a
// Spark query's driver, `lockstep executor` an executor), a headless Java 17 runtime and the
// shared libraries it loads (Debian packages), and the Spark runner with its jars and Spark's
// Kubernetes backend, packed by internal/ociimage into a tarball.
//
//	hack/tools.sh spark_image      # the inputs, cached in $LOCKSTEP_TOOLS
//	go run ./hack/image-spark -ref ghcr.io/lockstep-dev/lockstep-spark:dev -out bin/lockstep-spark-image.tar
//	ctr -n k8s.io images import bin/lockstep-spark-image.tar
//
// `make image-spark` runs both. docs/spark.md says how large the image is and how to shrink it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/lockstep-dev/lockstep/controller"
	"github.com/lockstep-dev/lockstep/engine/spark/sparkimage"
)

func main() {
	ref := flag.String("ref", controller.SparkImageRepository+":dev", "image reference to tag the tarball with")
	out := flag.String("out", "bin/lockstep-spark-image.tar", "tarball to write")
	version := flag.String("version", "dev", "version linked into the binary (lockstep version)")
	flag.Parse()
	digest, err := sparkimage.Write(context.Background(), sparkimage.Options{Root: ".", Ref: *ref, Version: *version, Out: *out})
	if err != nil {
		fmt.Fprintln(os.Stderr, "image-spark:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s (%s) to %s\n", *ref, digest, *out)
}
