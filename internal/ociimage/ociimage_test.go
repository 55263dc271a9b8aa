package ociimage_test

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/lockstep-dev/lockstep/internal/ociimage"
)

// TestWrite packs a real static binary and reads the tarball back as `ctr images import`
// would: the tag, the entrypoint, the non-root user and the files of the one layer.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "pause")
	if err := ociimage.BuildStatic(context.Background(), "../..", "./internal/testenv/pause", bin, ""); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image.tar")
	spec := ociimage.Spec{Ref: "localhost/pause:test", Binary: bin, Entrypoint: "/pause",
		Labels: map[string]string{"org.opencontainers.image.version": "test"}}
	digest, err := ociimage.Write(spec, out)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ociimage.Write(spec, filepath.Join(dir, "again.tar"))
	if err != nil {
		t.Fatal(err)
	}
	if again != digest {
		t.Errorf("the same inputs gave digests %s and %s, want one (reproducible)", digest, again)
	}
	tag, _ := name.NewTag(spec.Ref)
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/pause" || cfg.Config.User != "65532:65532" {
		t.Errorf("config = os %s, entrypoint %v, user %q; want linux, [/pause], 65532:65532", cfg.OS, cfg.Config.Entrypoint, cfg.Config.User)
	}
	if cfg.Config.Labels["org.opencontainers.image.version"] != "test" {
		t.Errorf("labels = %v", cfg.Config.Labels)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers = %d, %v; want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	modes := map[string]int64{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		modes[h.Name] = h.Mode
	}
	for name, mode := range map[string]int64{"pause": 0o755, "tmp/": 0o1777, "etc/passwd": 0o644} {
		if got, ok := modes[name]; !ok || got != mode {
			t.Errorf("layer file %s: mode %o (present %v), want %o; files %v", name, got, ok, mode, modes)
		}
	}
}
