package s3_test

import (
	"testing"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/storetest"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// go test -run '^$' -bench BatchOverhead ./checkpoint/s3/   (LOCKSTEP_TEST_S3=minio for MinIO)
func BenchmarkBatchOverhead(b *testing.B) {
	storetest.BenchmarkBatchOverhead(b, func(b *testing.B) checkpoint.Store {
		return open(b, testenv.S3(b), "bench/q")
	})
}
