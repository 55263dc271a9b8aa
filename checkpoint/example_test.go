package checkpoint_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

// An engine's use of a checkpoint: claim the location, find where to start,
// then log each batch before it runs and commit it after.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "ckpt")
	defer os.RemoveAll(dir)

	store, err := checkpoint.Open(ctx, dir) // s3:// needs checkpoint.WithS3(s3.Opener())
	if err != nil {
		log.Fatal(err)
	}
	c, err := checkpoint.Claim(ctx, store, checkpoint.Owner{Namespace: "payments", Name: "revenue"})
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		h, err := c.Head(ctx)
		if err != nil {
			log.Fatal(err)
		}
		batch := h.Next()
		offsets := checkpoint.Offsets{BatchID: batch, Sources: []checkpoint.SourceOffset{
			{Source: "orders", Offset: json.RawMessage(fmt.Sprint(10 * (batch + 1)))},
		}}
		if err := c.AddOffsets(ctx, offsets); err != nil {
			log.Fatal(err) // errors.Is(err, checkpoint.ErrFenced): another writer took over
		}
		// … run the batch, commit it to the sink …
		if err := c.AddCommit(ctx, checkpoint.Commit{BatchID: batch}); err != nil {
			log.Fatal(err)
		}
	}
	h, _ := c.Head(ctx)
	fmt.Println("committed:", h.Committed.BatchID, "next:", h.Next(), "replay:", h.Replay())

	// Another query cannot take the location over by accident.
	_, err = checkpoint.Claim(ctx, store, checkpoint.Owner{Namespace: "payments", Name: "other"})
	fmt.Println(err != nil)
	// Output:
	// committed: 2 next: 3 replay: false
	// true
}
