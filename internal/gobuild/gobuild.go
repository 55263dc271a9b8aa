// Package gobuild builds the project's binaries the one way the tests and the images share:
// static, -trimpath. One set of flags means one compilation of the dependencies in Go's build
// cache (a second set, a plain go build, compiled them all again in a cold run).
package gobuild

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
)

// Static builds the Go package pkg of the module in dir into the static Linux binary out, for
// an image: CGO_ENABLED=0 (no libc in the image), GOOS=linux, -trimpath, and ldflags (for
// example "-X main.version=v1.2.3"). The Go toolchain's build cache makes a repeated build cheap.
func Static(ctx context.Context, dir, pkg, out, ldflags string) error {
	return build(ctx, dir, pkg, out, ldflags, "GOOS=linux")
}

// Binary builds pkg into out as Static does but for this machine's system, for a binary the
// tests run here; on Linux it shares Static's compilations.
func Binary(ctx context.Context, dir, pkg, out string) error {
	return build(ctx, dir, pkg, out, "")
}

func build(ctx context.Context, dir, pkg, out, ldflags string, env ...string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w "+ldflags, "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false"), env...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, stderr.Bytes())
	}
	return nil
}
