// Package sparktest gives tests the Spark runner that `make tools` built, with its class-data
// archive. It lives beside the runtime it serves, so that internal/testenv, which every
// package's tests use, imports nothing of the runtimes.
package sparktest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine/spark"
)

// Runner returns the Spark runner and java that `make tools` (hack/tools.sh spark) built
// into the tool cache, failing the test with that command when they are missing. Each query
// run on it starts one JVM (local[2], a 1 GiB heap by default): keep Spark cases few.
//
// The first call on a tools cache also makes the runner's class-data archive
// (spark.ClassArchive), which every later JVM on the runner starts from: the tests start
// dozens of short-lived drivers, and each spends a third of its CPU less.
func Runner(t testing.TB) spark.Runner {
	t.Helper()
	r, err := spark.FindRunner()
	if err != nil {
		t.Fatal(err)
	}
	classArchive.Do(func() { classArchive.err = makeClassArchive(r) })
	if classArchive.err != nil {
		t.Logf("the Spark JVMs start without a class-data archive: %v", classArchive.err)
	}
	return r
}

var classArchive struct {
	sync.Once
	err error
}

// makeClassArchive makes r's class-data archive unless it is there: one small query (files →
// filter → windowed count → Delta) on Spark, whose JVM writes the classes it loaded at its
// exit. Test binaries that start at once wait for the first one's (a file lock).
func makeClassArchive(r spark.Runner) error {
	path := filepath.Join(r.Dir, spark.ClassArchive)
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	began := time.Now()
	dir, err := os.MkdirTemp("", "lockstep-class-archive-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	in := filepath.Join(dir, "in")
	if err := os.Mkdir(in, 0o755); err != nil {
		return err
	}
	for i := range 3 {
		row := fmt.Sprintf(`{"id":"o-%d","amount":%d.5,"ts":"2026-01-05T10:00:%02dZ"}`+"\n", i, i, 7*i)
		if err := os.WriteFile(filepath.Join(in, fmt.Sprintf("part-%d.json", i)), []byte(row), 0o644); err != nil {
			return err
		}
	}
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	obj := qt.Make("class-archive", "testenv").
		FilesSource("orders", in, v1.FormatJSON, qt.Col("id", v1.TypeString), qt.Col("amount", v1.TypeDouble), qt.Col("ts", v1.TypeTimestamp)).
		EditSource("orders", func(s *v1.Source) { s.Files.MaxFilesPerTrigger = new(int32(1)) }).
		Filter("amount > 0.0").Watermark("ts", "5s").
		Aggregate("", []v1.GroupKey{qt.Window("ts", "10s")}, qt.Agg("orders", v1.AggCount, "")).
		OutputMode(v1.OutputAppend).DeltaSink(filepath.Join(dir, "out")).AvailableNow().Checkpoint(filepath.Join(dir, "ck")).
		Edit(func(s *v1.StreamingQuerySpec) {
			s.Runtime.Spark = &v1.SparkRuntime{Conf: map[string]string{v1.SparkDriverJavaOptions: "-XX:ArchiveClassesAtExit=" + tmp}}
		}).Obj()
	q, err := spark.New(obj, spark.Options{Runner: r, LogPath: filepath.Join(dir, "spark.log"), Stdout: io.Discard}) // the JVM's warnings of classes it cannot archive
	if err != nil {
		return err
	}
	if _, err := q.Run(context.Background()); err != nil {
		return fmt.Errorf("the query that makes it: %w", err)
	}
	if _, err := os.Stat(tmp); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "spark.log"))
		return fmt.Errorf("java wrote no archive (%w); the end of Spark's log:\n%s", err, log[max(0, len(log)-2048):])
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "sparktest: made Spark's class-data archive %s in %s\n", path, time.Since(began).Round(time.Second))
	return nil
}
