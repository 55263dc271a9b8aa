package checkpoint_test

import (
	"testing"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/storetest"
)

// go test -run '^$' -bench BatchOverhead ./checkpoint/
func BenchmarkBatchOverhead(b *testing.B) {
	storetest.BenchmarkBatchOverhead(b, func(b *testing.B) checkpoint.Store { return newDir(b) })
}
