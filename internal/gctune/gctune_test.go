package gctune

import (
	"errors"
	"io/fs"
	"runtime/debug"
	"testing"
)

// files is a file system of the given contents.
func files(m map[string]string) func(string) ([]byte, error) {
	return func(p string) ([]byte, error) {
		if c, ok := m[p]; ok {
			return []byte(c), nil
		}
		return nil, fs.ErrNotExist
	}
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseLimit(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"max\n", 0, true},
		{"536870912\n", 512 << 20, true},
		{"9223372036854771712\n", 0, true}, // cgroup v1: no limit
		{"", 0, false},
		{"-1", 0, false},
		{"lots", 0, false},
	} {
		got, ok := ParseLimit([]byte(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("ParseLimit(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestCgroupMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"container v2", map[string]string{"/proc/self/cgroup": "0::/\n", "/sys/fs/cgroup/memory.max": "1073741824\n"}, 1 << 30},
		{"container v2 without a limit", map[string]string{"/proc/self/cgroup": "0::/\n", "/sys/fs/cgroup/memory.max": "max\n"}, 0},
		{"nested v2, the parent's limit is the smaller", map[string]string{
			"/proc/self/cgroup":                          "0::/kubepods/pod1/c1\n",
			"/sys/fs/cgroup/kubepods/pod1/c1/memory.max": "max\n",
			"/sys/fs/cgroup/kubepods/pod1/memory.max":    "2147483648\n",
			"/sys/fs/cgroup/kubepods/memory.max":         "8589934592\n",
		}, 2 << 30},
		{"v1", map[string]string{
			"/proc/self/cgroup":                             "12:cpu,cpuacct:/x\n11:memory:/x\n",
			"/sys/fs/cgroup/memory/x/memory.limit_in_bytes": "268435456\n",
		}, 256 << 20},
		{"v1 without a limit", map[string]string{
			"/proc/self/cgroup":                           "11:memory:/\n",
			"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}, 0},
		{"no cgroup files", map[string]string{}, 0},
		{"unreadable content", map[string]string{"/sys/fs/cgroup/memory.max": "?"}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := CgroupMemoryLimit(files(c.files)); got != c.want {
				t.Errorf("CgroupMemoryLimit = %d, want %d", got, c.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	limited := files(map[string]string{"/sys/fs/cgroup/memory.max": "1000000000\n"})
	for _, c := range []struct {
		name string
		env  map[string]string
		read func(string) ([]byte, error)
		want Settings
	}{
		{"no settings, a container limit", nil, limited,
			Settings{GCPercent: DefaultGCPercent, MemoryLimit: 900000000, CgroupLimit: 1000000000}},
		{"no settings, no limit", nil, files(nil), Settings{GCPercent: DefaultGCPercent}},
		{"GOGC wins", map[string]string{"GOGC": "50"}, limited, Settings{MemoryLimit: 900000000, CgroupLimit: 1000000000}},
		{"GOGC=off wins", map[string]string{"GOGC": "off"}, files(nil), Settings{}},
		{"GOMEMLIMIT wins", map[string]string{"GOMEMLIMIT": "100MiB"}, limited, Settings{GCPercent: DefaultGCPercent, CgroupLimit: 1000000000}},
		{"both set", map[string]string{"GOGC": "100", "GOMEMLIMIT": "1GiB"}, limited, Settings{CgroupLimit: 1000000000}},
		{"unreadable cgroup", nil, func(string) ([]byte, error) { return nil, errors.New("permission denied") }, Settings{GCPercent: DefaultGCPercent}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Defaults(Env{Getenv: env(c.env), ReadFile: c.read}); got != c.want {
				t.Errorf("Defaults = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestApplyRestores(t *testing.T) {
	gc0 := debug.SetGCPercent(100)
	defer debug.SetGCPercent(gc0)
	lim0 := debug.SetMemoryLimit(-1)

	restore := Apply(Settings{GCPercent: 300, MemoryLimit: 1 << 30})
	if got := debug.SetGCPercent(300); got != 300 {
		t.Errorf("GC percent = %d, want 300", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("memory limit = %d, want %d", got, 1<<30)
	}
	restore()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GC percent after restore = %d, want 100", got)
	}
	if got := debug.SetMemoryLimit(-1); got != lim0 {
		t.Errorf("memory limit after restore = %d, want %d", got, lim0)
	}

	// Zero settings change nothing.
	Apply(Settings{})()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GC percent after empty settings = %d, want 100", got)
	}
}
