package compat_test

import (
	"testing"

	"github.com/lockstep-dev/lockstep/compat"
)

func TestMoved(t *testing.T) {
	cases := []struct {
		from, to string
		want     bool
	}{
		{"s3://b/q", "s3://b/q-v2", true},
		{"/ckpt/q", "/ckpt/q2", true},
		{"s3://b/q", "s3://b/q/", false},
		{"file:///ckpt/q", "/ckpt/q/", false},
		{"", "s3://b/q", false}, // no location before: the store's, not known here
		{"s3://b/q", "", false},
	}
	for _, tc := range cases {
		if got := compat.Moved(tc.from, tc.to); got != tc.want {
			t.Errorf("Moved(%q, %q) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}
