package controller_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/controller/internal/podrunner"
	"github.com/lockstep-dev/lockstep/internal/gobuild"
)

// buildLockstep builds the lockstep binary that the pod runner starts for engine pods.
func buildLockstep(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "lockstep")
	if err := gobuild.Binary(context.Background(), "..", "./cmd/lockstep", bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// putOrders uploads one JSON-lines file of n orders to the landing folder.
func (f *fixture) putOrders(name string, first, n int) {
	f.t.Helper()
	var b bytes.Buffer
	for i := first; i < first+n; i++ {
		fmt.Fprintf(&b, `{"id":"o%d","amount":%d.5}`+"\n", i, i+1)
	}
	_, err := f.s3.Client(f.t).PutObject(context.Background(), f.s3.Bucket, "landing/orders/"+name, &b, int64(b.Len()), minio.PutObjectOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
}

// TestEndToEnd runs a query through the controller, the webhooks and the real engine (as
// local processes started by the pod runner): batches commit, status shows them, a
// compatible change restarts the engine, which continues from the checkpoint without loss or
// duplicates, and an incompatible change is refused.
func TestEndToEnd(t *testing.T) {
	bin := buildLockstep(t)
	f, _ := webhookFixture(t)
	runner := podrunner.New(f.c, bin, t.TempDir(), f.ns)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { _ = runner.Run(ctx); close(stopped) }()
	t.Cleanup(func() { cancel(); <-stopped })
	defer func() {
		if t.Failed() {
			t.Logf("engine logs:\n%s", runner.Logs("orders-engine"))
		}
	}()

	rows := 0
	for i := range 3 {
		f.putOrders(fmt.Sprintf("%04d.json", i), rows, 4)
		rows += 4
	}
	q := f.query("orders").ProcessingTime("500ms").
		EditSource("orders", func(s *v1.Source) { s.Files.MaxFilesPerTrigger = ptr.To(int32(1)) }).Obj()
	f.create(q)

	var queryID string
	eventually(t, "three batches commit and the query runs", func() error {
		q := f.get("orders")
		if c := condition(q, v1.ConditionReady); c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready %s/%s: %s", c.Status, c.Reason, c.Message)
		}
		if b := q.Status.LatestCommittedBatch; b == nil || *b < 2 {
			return fmt.Errorf("latest committed batch %v", b)
		}
		queryID = q.Status.QueryID
		return nil
	})
	q = f.eventuallyCondition("orders", v1.ConditionProgressing, metav1.ConditionTrue, v1.ReasonBatchesCommitting)
	if q.Status.Phase != v1.PhaseRunning || len(q.Status.Sources) != 1 || q.Status.Sources[0].Offsets == "" || q.Status.LastProgress == nil {
		t.Errorf("status = %+v, want Running with the source's offsets and the last progress", q.Status)
	}

	// A compatible change rolls the engine, which continues from the checkpoint.
	if err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Transform[0].Filter = "amount > 2.0" }); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the engine of generation 2 runs", func() error {
		q := f.get("orders")
		c := condition(q, v1.ConditionReady)
		if c.Status != metav1.ConditionTrue || c.ObservedGeneration != q.Generation || q.Generation < 2 {
			return fmt.Errorf("Ready %s/%s (generation %d of %d): %s", c.Status, c.Reason, c.ObservedGeneration, q.Generation, c.Message)
		}
		return nil
	})
	for i := 3; i < 5; i++ {
		f.putOrders(fmt.Sprintf("%04d.json", i), rows, 4)
		rows += 4
	}
	eventually(t, "the new files commit", func() error {
		q := f.get("orders")
		if b := q.Status.LatestCommittedBatch; b == nil || *b < 4 {
			return fmt.Errorf("latest committed batch %v", b)
		}
		return nil
	})
	if got := f.get("orders").Status.QueryID; got != queryID {
		t.Errorf("query id changed from %s to %s: the engine started a new checkpoint", queryID, got)
	}

	// Every row was read exactly once over the two engines.
	cp, err := checkpoint.Load(context.Background(), f.openCheckpoint("orders"))
	if err != nil {
		t.Fatal(err)
	}
	batches, err := cp.Batches(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	read := int64(0)
	for _, b := range batches {
		if b.Commit != nil {
			read += b.Commit.Progress.NumInputRows
		}
	}
	if read != int64(rows) {
		t.Errorf("the committed batches read %d rows, want %d (each uploaded row once)", read, rows)
	}

	// An incompatible change is refused at admission.
	err = f.update("orders", func(q *v1.StreamingQuery) {
		q.Spec.Sources[0].Files.Path = "s3://" + f.s3.Bucket + "/landing/elsewhere"
	})
	if err == nil || !strings.Contains(err.Error(), "spec.sources[0]") {
		t.Errorf("incompatible update = %v, want refused on spec.sources[0]", err)
	}
}
