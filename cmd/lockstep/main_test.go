package main

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestMain stops the shared test services (S3) when the tests end.
func TestMain(m *testing.M) { testenv.Main(m) }
