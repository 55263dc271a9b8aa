package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// NonRootUID is the user images run as unless Spec.User says otherwise: distroless's
// "nonroot", which Lockstep's manifests name in runAsUser.
const NonRootUID = 65532

// hostCABundle is where Debian-like systems keep the CA certificates Go's crypto/x509
// reads on Linux.
const hostCABundle = "/etc/ssl/certs/ca-certificates.crt"

// epoch is every file's modification time and the image's creation time, so that the
// same inputs give the same image digest.
var epoch = time.Unix(0, 0).UTC()

// Spec describes an image of one static binary.
type Spec struct {
	// Ref is the image reference the tarball is tagged with, e.g. localhost/lockstep:dev.
	Ref string
	// Binary is the path of the static binary on this machine.
	Binary string
	// Entrypoint is the binary's path inside the image, e.g. /lockstep.
	Entrypoint string
	// User the image runs as; default "65532:65532".
	User string
	// CACertificates copies this machine's CA bundle into the image when it exists, so
	// that the binary can reach HTTPS endpoints (AWS S3) with Go's default trust store.
	CACertificates bool
	// Labels are the image's OCI labels (org.opencontainers.image.version, ...).
	Labels map[string]string
	// Trees are folders of this machine packed as layers below the binary's, in order (the
	// Spark image's Java runtime and jars). Default: none.
	Trees []Tree
	// Env is added to the image's environment (KEY=value), after PATH and HOME; a PATH here
	// replaces the default "/".
	Env []string
}

// Write builds the image described by s and writes it to the tarball at out. It returns
// the image's digest.
func Write(s Spec, out string) (v1.Hash, error) {
	tmp, err := os.MkdirTemp(filepath.Dir(out), ".ociimage-")
	if err != nil {
		return v1.Hash{}, fmt.Errorf("write image %s: %w", s.Ref, err)
	}
	defer os.RemoveAll(tmp)
	img, err := build(s, tmp)
	if err != nil {
		return v1.Hash{}, err
	}
	tag, err := name.NewTag(s.Ref)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image reference %q: %w", s.Ref, err)
	}
	if err := tarball.WriteToFile(out, tag, img); err != nil {
		return v1.Hash{}, fmt.Errorf("write image %s to %s: %w", s.Ref, out, err)
	}
	return img.Digest()
}

// Build returns the image described by s: the layers of its trees, then the binary's, on an
// empty base. Trees are staged in the system's temporary folder, which must outlive the image.
func Build(s Spec) (v1.Image, error) { return build(s, "") }

func build(s Spec, tmp string) (v1.Image, error) {
	if !strings.HasPrefix(s.Entrypoint, "/") || s.Entrypoint == "/" {
		return nil, fmt.Errorf("entrypoint %q: want an absolute file path such as /lockstep", s.Entrypoint)
	}
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, fmt.Errorf("read the image's binary: %w", err)
	}
	user := s.User
	if user == "" {
		user = fmt.Sprintf("%d:%d", NonRootUID, NonRootUID)
	}
	files := []file{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, dir: true, uid: NonRootUID},
		{name: "etc/passwd", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRootUID, NonRootUID))},
		{name: "etc/group", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRootUID))},
		{name: s.Entrypoint[1:], mode: 0o755, data: bin},
	}
	if s.CACertificates {
		if ca, err := os.ReadFile(hostCABundle); err == nil {
			files = append(files, file{name: "etc/ssl/", mode: 0o755, dir: true}, file{name: "etc/ssl/certs/", mode: 0o755, dir: true},
				file{name: hostCABundle[1:], mode: 0o644, data: ca})
		} else if !os.IsNotExist(err) {
			return nil, fmt.Errorf("read CA certificates: %w", err)
		}
	}
	layerTar, err := tarLayer(files)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	var layers []v1.Layer
	for _, t := range s.Trees {
		l, err := treeLayer(t, tmp)
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	img, err := mutate.AppendLayers(empty.Image, append(layers, layer)...)
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config.Entrypoint = []string{s.Entrypoint}
	cfg.Config.Env = []string{"PATH=/", "HOME=/home/nonroot"}
	for _, e := range s.Env {
		if strings.HasPrefix(e, "PATH=") {
			cfg.Config.Env[0] = e
			continue
		}
		cfg.Config.Env = append(cfg.Config.Env, e)
	}
	cfg.Config.User = user
	cfg.Config.WorkingDir = "/"
	cfg.Config.Labels = s.Labels
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	return img, nil
}

type file struct {
	name string
	mode int64
	dir  bool
	uid  int
	data []byte
}

// tarLayer writes files, parents first, as an uncompressed tar.
func tarLayer(files []file) ([]byte, error) {
	sort.SliceStable(files, func(i, j int) bool { return files[i].name < files[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: epoch, Uid: f.uid, Gid: f.uid, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("image layer %s: %w", path.Clean(f.name), err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("image layer %s: %w", path.Clean(f.name), err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	return buf.Bytes(), nil
}
