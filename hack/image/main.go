// Command image builds the lockstep container image from this checkout without Docker or a
// registry: a static build of ./cmd/lockstep packed by internal/ociimage into a tarball.
//
//	go run ./hack/image -ref ghcr.io/lockstep-dev/lockstep:dev -out bin/lockstep-image.tar
//	ctr -n k8s.io images import bin/lockstep-image.tar     # or: docker load -i, podman load -i
//
// `make image` runs it. The image runs /lockstep as user 65532, like the Dockerfile's.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lockstep-dev/lockstep/internal/gobuild"
	"github.com/lockstep-dev/lockstep/internal/ociimage"
)

func main() {
	ref := flag.String("ref", "ghcr.io/lockstep-dev/lockstep:dev", "image reference to tag the tarball with")
	out := flag.String("out", "bin/lockstep-image.tar", "tarball to write")
	version := flag.String("version", "dev", "version linked into the binary (lockstep version)")
	flag.Parse()
	if err := run(context.Background(), *ref, *out, *version); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, ref, out, version string) error {
	tmp, err := os.MkdirTemp("", "lockstep-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "lockstep")
	if err := gobuild.Static(ctx, ".", "./cmd/lockstep", bin, "-X main.version="+version); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	digest, err := ociimage.Write(ociimage.Spec{
		Ref: ref, Binary: bin, Entrypoint: "/lockstep", CACertificates: true,
		Labels: map[string]string{
			"org.opencontainers.image.source":  "https://github.com/lockstep-dev/lockstep",
			"org.opencontainers.image.version": version,
		},
	}, out)
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s (%s) to %s\n", ref, digest, out)
	return nil
}
