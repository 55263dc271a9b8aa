package ociimage_test

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/lockstep-dev/lockstep/internal/gobuild"
	"github.com/lockstep-dev/lockstep/internal/ociimage"
)

// buildPause builds the test pause binary, static, into dir and returns its path.
func buildPause(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "pause")
	if err := gobuild.Static(context.Background(), "../..", "./internal/testenv/pause", bin, ""); err != nil {
		t.Fatal(err)
	}
	return bin
}

// readImage reads the image tarball out back as `ctr images import` would, by its tag ref:
// its config and its layers.
func readImage(t *testing.T, out, ref string) (*v1.ConfigFile, []v1.Layer) {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	return cfg, layers
}

// layerFiles returns the headers of the files in layer, in order.
func layerFiles(t *testing.T, layer v1.Layer) []*tar.Header {
	t.Helper()
	rc, err := layer.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var files []*tar.Header
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		} else if err != nil {
			t.Fatal(err)
		}
		files = append(files, h)
	}
}

// TestWrite packs a real static binary and reads the tarball back as `ctr images import`
// would: the tag, the entrypoint, the non-root user and the files of the one layer.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	bin := buildPause(t, dir)
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
	cfg, layers := readImage(t, out, spec.Ref)
	if cfg.OS != "linux" || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/pause" || cfg.Config.User != "65532:65532" {
		t.Errorf("config = os %s, entrypoint %v, user %q; want linux, [/pause], 65532:65532", cfg.OS, cfg.Config.Entrypoint, cfg.Config.User)
	}
	if cfg.Config.Labels["org.opencontainers.image.version"] != "test" {
		t.Errorf("labels = %v", cfg.Config.Labels)
	}
	if len(layers) != 1 {
		t.Fatalf("layers = %d; want 1", len(layers))
	}
	modes := map[string]int64{}
	for _, h := range layerFiles(t, layers[0]) {
		modes[h.Name] = h.Mode
	}
	for name, mode := range map[string]int64{"pause": 0o755, "tmp/": 0o1777, "etc/passwd": 0o644} {
		if got, ok := modes[name]; !ok || got != mode {
			t.Errorf("layer file %s: mode %o (present %v), want %o; files %v", name, got, ok, mode, modes)
		}
	}
}

// TestWriteTrees packs a folder with a file, a subfolder and an absolute symbolic link (as a
// Debian package's files are) below the binary, and reads the layers back: the tree's layer
// comes first, at its destination, owned by root, the link kept as a link; the image's
// environment has the spec's PATH and variables.
func TestWriteTrees(t *testing.T) {
	dir := t.TempDir()
	bin := buildPause(t, dir)
	tree := filepath.Join(dir, "tree")
	if err := os.MkdirAll(filepath.Join(tree, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "lib", "a.so"), []byte("elf"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/opt/x/lib/a.so", filepath.Join(tree, "link.so")); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image.tar")
	spec := ociimage.Spec{Ref: "localhost/pause:trees", Binary: bin, Entrypoint: "/pause",
		Trees: []ociimage.Tree{{Src: tree, Dest: "/opt/x"}}, Env: []string{"PATH=/opt/x:/", "JAVA_HOME=/opt/x"}}
	if _, err := ociimage.Write(spec, out); err != nil {
		t.Fatal(err)
	}
	cfg, layers := readImage(t, out, spec.Ref)
	if want := []string{"PATH=/opt/x:/", "HOME=/home/nonroot", "JAVA_HOME=/opt/x"}; !slices.Equal(cfg.Config.Env, want) {
		t.Errorf("env = %v, want %v", cfg.Config.Env, want)
	}
	if len(layers) != 2 {
		t.Fatalf("layers = %d; want 2", len(layers))
	}
	got := map[string]string{}
	for _, h := range layerFiles(t, layers[0]) {
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s owned by %d:%d, want root", h.Name, h.Uid, h.Gid)
		}
		got[h.Name] = string(h.Typeflag) + h.Linkname
	}
	want := map[string]string{"opt/": "5", "opt/x/": "5", "opt/x/lib/": "5", "opt/x/lib/a.so": "0", "opt/x/link.so": "2/opt/x/lib/a.so"}
	if !maps.Equal(got, want) {
		t.Errorf("tree layer = %v, want %v", got, want)
	}
}
