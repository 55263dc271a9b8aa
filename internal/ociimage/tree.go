package ociimage

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Tree is a folder of this machine that becomes one layer of an image, below the binary's:
// its files, folders and symbolic links, owned by root, at Dest inside the image.
type Tree struct {
	// Src is the folder on this machine.
	Src string
	// Dest is where Src's content goes in the image, e.g. / or /opt/spark/libs.
	Dest string
}

// treeLayer writes the tree as an uncompressed tar into a file of dir (the tree may be
// hundreds of megabytes: it is streamed, not held in memory) and returns it as a layer,
// compressed with gzip's fastest level when the image is written.
func treeLayer(t Tree, dir string) (v1.Layer, error) {
	f, err := os.CreateTemp(dir, "layer-*.tar")
	if err != nil {
		return nil, fmt.Errorf("image layer %s: %w", t.Src, err)
	}
	defer f.Close()
	if err := writeTree(f, t); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("image layer %s: %w", t.Src, err)
	}
	layer, err := tarball.LayerFromFile(f.Name(), tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return nil, fmt.Errorf("image layer %s: %w", t.Src, err)
	}
	return layer, nil
}

// writeTree writes t as a tar to w in a stable order (lexical, parents first), every entry
// owned by root with the epoch as its time, so that the same tree gives the same layer.
func writeTree(w io.Writer, t Tree) error {
	dest := path.Clean("/" + t.Dest)[1:]
	var names []string
	err := filepath.WalkDir(t.Src, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		return fmt.Errorf("image layer %s: %w", t.Src, err)
	}
	sort.Strings(names)
	tw := tar.NewWriter(w)
	// The parents of Dest come first.
	if dest != "" {
		for i, parent := 0, ""; i < len(dest); i++ {
			if dest[i] == '/' {
				parent = dest[:i]
				if err := tw.WriteHeader(&tar.Header{Name: parent + "/", Mode: 0o755, ModTime: epoch, Typeflag: tar.TypeDir, Format: tar.FormatPAX}); err != nil {
					return fmt.Errorf("image layer %s: %w", t.Src, err)
				}
			}
		}
	}
	for _, p := range names {
		rel, err := filepath.Rel(t.Src, p)
		if err != nil {
			return err
		}
		name := path.Join(dest, filepath.ToSlash(rel))
		if name == "" || name == "." {
			continue // the image's root
		}
		info, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("image layer %s: %w", p, err)
		}
		h := &tar.Header{Name: name, Mode: int64(info.Mode().Perm()), ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case info.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, name+"/"
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("image layer %s: %w", p, err)
			}
			h.Typeflag, h.Linkname = tar.TypeSymlink, target
		case info.Mode().IsRegular():
			h.Typeflag, h.Size = tar.TypeReg, info.Size()
		default:
			continue // devices and sockets have no place in an image
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("image layer %s: %w", name, err)
		}
		if h.Typeflag == tar.TypeReg {
			if err := copyFile(tw, p); err != nil {
				return fmt.Errorf("image layer %s: %w", name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("image layer %s: %w", t.Src, err)
	}
	return nil
}

func copyFile(w io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}
