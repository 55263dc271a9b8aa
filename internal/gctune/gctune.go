// Package gctune sets the garbage collector's defaults of a process that runs
// queries: `lockstep run` and `lockstep engine`, and the benchmarks that
// measure them.
//
// Go's defaults (GOGC=100, no memory limit) collect whenever the heap doubled.
// An engine's live heap is mostly the rows of the batch in flight, so a
// collection scans a whole batch again and again: about a sixth of the CPU of
// a Kafka→Kafka query (docs/benchmarks.md). Defaults lets the heap grow to
// DefaultGCPercent above the live heap instead, and, where the container has a
// memory limit (cgroup v2 memory.max, or v1 memory.limit_in_bytes), sets a
// soft limit of MemoryLimitShare of it: near the limit the collector runs as
// often as it must, rather than the process being killed. GOGC and GOMEMLIMIT,
// when set, always win.
package gctune

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// DefaultGCPercent is the GC percent when GOGC is not set.
const DefaultGCPercent = 200

// MemoryLimitShare is the share of the container's memory limit the soft
// memory limit is set to when GOMEMLIMIT is not set: the rest is for what
// the Go runtime does not count (thread stacks, cgo, the page cache of
// written files charged to the container).
const MemoryLimitShare = 0.9

// Settings are what Apply sets; a zero field means unchanged.
type Settings struct {
	// GCPercent is the GC percent to set, 0 for unchanged (GOGC is set).
	GCPercent int
	// MemoryLimit is the soft memory limit in bytes to set, 0 for
	// unchanged (GOMEMLIMIT is set, or no container limit is known).
	MemoryLimit int64
	// CgroupLimit is the container's memory limit in bytes, 0 for none.
	CgroupLimit int64
}

func (s Settings) String() string {
	gc, limit := "GOGC from the environment", "no memory limit"
	if s.GCPercent != 0 {
		gc = fmt.Sprintf("GC percent %d", s.GCPercent)
	}
	switch {
	case s.MemoryLimit != 0:
		limit = fmt.Sprintf("memory limit %d MiB (%.0f%% of the container's %d MiB)", s.MemoryLimit>>20, MemoryLimitShare*100, s.CgroupLimit>>20)
	case s.CgroupLimit != 0:
		limit = "GOMEMLIMIT from the environment"
	}
	return gc + ", " + limit
}

// Env is what Defaults reads: the environment and the files of the process's
// cgroup.
type Env struct {
	Getenv   func(string) string
	ReadFile func(string) ([]byte, error)
}

// OSEnv is the process's own environment and file system.
var OSEnv = Env{Getenv: os.Getenv, ReadFile: os.ReadFile}

// Defaults returns the settings for env: DefaultGCPercent unless GOGC is set,
// and MemoryLimitShare of the cgroup's memory limit unless GOMEMLIMIT is set
// or there is none.
func Defaults(env Env) Settings {
	var s Settings
	if env.Getenv("GOGC") == "" {
		s.GCPercent = DefaultGCPercent
	}
	s.CgroupLimit = CgroupMemoryLimit(env.ReadFile)
	if s.CgroupLimit > 0 && env.Getenv("GOMEMLIMIT") == "" {
		s.MemoryLimit = int64(float64(s.CgroupLimit) * MemoryLimitShare)
	}
	return s
}

// Apply sets s and returns a function that restores what was set before.
func Apply(s Settings) (restore func()) {
	gc, limit := -2, int64(-1)
	if s.GCPercent != 0 {
		gc = debug.SetGCPercent(s.GCPercent)
	}
	if s.MemoryLimit != 0 {
		limit = debug.SetMemoryLimit(s.MemoryLimit)
	}
	return func() {
		if gc != -2 {
			debug.SetGCPercent(gc)
		}
		if limit >= 0 {
			debug.SetMemoryLimit(limit)
		}
	}
}

// Tune applies the defaults of the process's own environment and returns
// them, for a log line.
func Tune() Settings {
	s := Defaults(OSEnv)
	Apply(s)
	return s
}

// unlimited is where cgroup v1 reports no limit: the largest multiple of the
// page size below 2^63.
const unlimited = math.MaxInt64 / 2

// CgroupMemoryLimit returns the memory limit of the process's cgroup in bytes,
// 0 when there is none or it cannot be read: the smallest of cgroup v2's
// memory.max of the process's cgroup (from /proc/self/cgroup) and of its
// parents, of the root of the cgroup namespace (a container's own), and of
// cgroup v1's memory.limit_in_bytes.
func CgroupMemoryLimit(readFile func(string) ([]byte, error)) int64 {
	const root = "/sys/fs/cgroup"
	paths := []string{root + "/memory.max", root + "/memory/memory.limit_in_bytes"}
	if self, err := readFile("/proc/self/cgroup"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(self))
		for sc.Scan() {
			// v2: "0::/path"; v1: "N:memory:/path" (or a list of controllers)
			parts := strings.SplitN(sc.Text(), ":", 3)
			if len(parts) != 3 {
				continue
			}
			switch {
			case parts[0] == "0" && parts[1] == "":
				for dir := filepath.Join(root, parts[2]); dir != root && strings.HasPrefix(dir, root+"/"); dir = filepath.Dir(dir) {
					paths = append(paths, filepath.Join(dir, "memory.max"))
				}
			case hasController(parts[1], "memory"):
				paths = append(paths, filepath.Join(root, "memory", parts[2], "memory.limit_in_bytes"))
			}
		}
	}
	var least int64
	for _, p := range paths {
		b, err := readFile(p)
		if err != nil {
			continue
		}
		if n, ok := ParseLimit(b); ok && n > 0 && (least == 0 || n < least) {
			least = n
		}
	}
	return least
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// ParseLimit reads the content of memory.max or memory.limit_in_bytes: the
// limit in bytes and true, or 0 and true when there is none ("max", or v1's
// near-2^63), or false when it is not a limit.
func ParseLimit(b []byte) (int64, bool) {
	t := strings.TrimSpace(string(b))
	if t == "max" {
		return 0, true
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	if n >= unlimited {
		return 0, true
	}
	return n, true
}
