// Package ociimage packs static binaries into container images without Docker or a
// registry, with go-containerregistry: one reproducible layer on an empty base, written
// as a tarball that `ctr images import`, `docker load` and `podman load` accept.
//
// It is how Lockstep's end-to-end suite (e2e/) and `make image` build the lockstep image
// from the checkout: the binary is built with CGO_ENABLED=0, so it needs no libc, and
// the image holds only that binary, /tmp, a passwd entry for the non-root user and,
// when the build machine has them, its CA certificates. Folders of the build machine (Spec.Trees)
// become layers below the binary's: Lockstep's Spark image (engine/spark/sparkimage) packs a Java
// runtime and Spark's jars that way.
package ociimage
