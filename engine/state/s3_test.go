package state_test

import (
	"testing"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// s3Store is a checkpoint store on the test S3 server, in a new bucket.
func s3Store(t testing.TB) checkpoint.Store {
	t.Helper()
	srv := testenv.S3(t)
	s, err := s3.Open(t.Context(), srv.Bucket, "q", s3.WithEndpoint(srv.URL), s3.WithRegion(srv.Region),
		s3.WithCredentials(srv.AccessKey, srv.SecretKey, ""))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCommitLoadS3(t *testing.T) { testCommitLoad(t, s3Store(t)) }
