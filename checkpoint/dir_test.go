package checkpoint_test

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/storetest"
)

func TestDir(t *testing.T) {
	storetest.Run(t, func(t *testing.T) checkpoint.Store { return newDir(t) })
}

func TestDirInSubfolderThatDoesNotExistYet(t *testing.T) {
	storetest.Run(t, func(t *testing.T) checkpoint.Store {
		d, err := checkpoint.OpenDir(filepath.Join(t.TempDir(), "not", "yet"))
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}

func TestOpenDirRefusesAFileAndARelativePath(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{file, "relative/path", ""} {
		if _, err := checkpoint.OpenDir(path); !errors.Is(err, checkpoint.ErrInvalidLocation) {
			t.Errorf("OpenDir(%q) error = %v, want ErrInvalidLocation", path, err)
		}
	}
}

// killChildEnv tells the test binary, re-executed by TestDirWriterKilledMidWrite,
// to act as the writer to kill: its value is "create|put <folder>".
const killChildEnv = "LOCKSTEP_TEST_KILLED_WRITER"

// killedSize is the size of the object the killed writer writes, and
// killedAfter how much of it it writes before it reports and waits to die.
const (
	killedSize  = 64 << 20
	killedAfter = 8 << 20
	killedKey   = "state/op/0/00000000000000000007.snapshot"
)

// TestKilledWriterChild is the child process of TestDirWriterKilledMidWrite;
// run on its own it does nothing.
func TestKilledWriterChild(t *testing.T) {
	mode, dir, ok := strings.Cut(os.Getenv(killChildEnv), " ")
	if !ok {
		return
	}
	d, err := checkpoint.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkpoint.SetAfterChunk(d, func(written int) {
		if written >= killedAfter {
			os.Stdout.WriteString("PARTIAL\n")
			time.Sleep(time.Hour) // until the parent kills this process
		}
	})
	data := bytes.Repeat([]byte("n"), killedSize)
	if mode == "create" {
		err = d.Create(t.Context(), killedKey, data)
	} else {
		err = d.Put(t.Context(), killedKey, data)
	}
	t.Fatalf("the write returned (%v) instead of being killed", err)
}

func TestDirWriterKilledMidWrite(t *testing.T) {
	for _, mode := range []string{"create", "put"} {
		t.Run(mode, func(t *testing.T) {
			root := t.TempDir()
			d, err := checkpoint.OpenDir(root)
			if err != nil {
				t.Fatal(err)
			}
			old := []byte("the previous version")
			if mode == "put" {
				if err := d.Put(t.Context(), killedKey, old); err != nil {
					t.Fatal(err)
				}
			}

			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestKilledWriterChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), killChildEnv+"="+mode+" "+root)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			if line != "PARTIAL\n" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("child said %q (%v), want PARTIAL", line, err)
			}
			if err := cmd.Process.Kill(); err != nil { // SIGKILL
				t.Fatal(err)
			}
			cmd.Wait()

			// The partial write is on disk, under a temporary name only.
			temps, _ := filepath.Glob(filepath.Join(root, "state", "op", "0", ".tmp-*"))
			if len(temps) != 1 {
				t.Fatalf("temporary files after the kill: %q, want one", temps)
			}
			if fi, err := os.Stat(temps[0]); err != nil || fi.Size() < killedAfter || fi.Size() >= killedSize {
				t.Fatalf("temporary file %s: %v, size %d; want a partial write", temps[0], err, fi.Size())
			}

			got, err := d.Get(t.Context(), killedKey)
			switch mode {
			case "create":
				if !errors.Is(err, checkpoint.ErrNotFound) {
					t.Errorf("after the killed Create, Get = %d bytes, %v; want ErrNotFound", len(got), err)
				}
			case "put":
				if err != nil || !bytes.Equal(got, old) {
					t.Errorf("after the killed Put, Get = %q, %v; want the previous version", got, err)
				}
			}
			keys, err := checkpoint.ListKeys(t.Context(), d, "")
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]int{"create": 0, "put": 1}[mode]
			if len(keys) != want {
				t.Errorf("List after the kill = %q, want %d keys and no temporary file", keys, want)
			}
			// The next writer is not disturbed by the leftover.
			if mode == "create" {
				if err := d.Create(t.Context(), killedKey, []byte("next writer")); err != nil {
					t.Errorf("Create after the kill error = %v", err)
				}
			}
		})
	}
}

func newDir(t testing.TB) *checkpoint.Dir {
	t.Helper()
	d, err := checkpoint.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A link to a file lists as that file, with the file's size, as reading it
// does (a source's folder may hold links); a dangling link is not listed.
func TestDirListFollowsLinksToFiles(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "data.json")
	if err := os.WriteFile(target, []byte(`{"a":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "linked.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "gone"), filepath.Join(dir, "dangling.json")); err != nil {
		t.Fatal(err)
	}
	d, err := checkpoint.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	list, err := d.List(t.Context(), "")
	if err != nil || len(list) != 1 || list[0].Key != "linked.json" || list[0].Size != 7 {
		t.Fatalf("List = %+v, %v; want linked.json of 7 bytes only", list, err)
	}
}
