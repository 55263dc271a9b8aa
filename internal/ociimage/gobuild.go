package ociimage

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
)

// BuildStatic builds the Go package pkg of the module in dir into the static binary out:
// CGO_ENABLED=0 (no libc in the image), GOOS=linux, -trimpath, and ldflags (for example
// "-X main.version=v1.2.3"). The Go toolchain's build cache makes a repeated build cheap.
func BuildStatic(ctx context.Context, dir, pkg, out, ldflags string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w "+ldflags, "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOFLAGS=-buildvcs=false")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, stderr.Bytes())
	}
	return nil
}
