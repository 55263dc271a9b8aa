package checkpoint_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

// Visible leaves out the keys readers skip: any path element starting with "." or "_".
func TestVisible(t *testing.T) {
	var list []checkpoint.ObjectInfo
	for _, k := range []string{"_hidden/x", "_lockstep_manifest/00001", "a/.tmp-1", "a/b.json", "a/_SUCCESS", "m/1", "x_y/z.json"} {
		list = append(list, checkpoint.ObjectInfo{Key: k})
	}
	var got []string
	for _, o := range checkpoint.Visible(list) {
		got = append(got, o.Key)
	}
	if diff := cmp.Diff([]string{"a/b.json", "m/1", "x_y/z.json"}, got); diff != "" {
		t.Errorf("Visible (-want +got):\n%s", diff)
	}
	if len(list) != 7 {
		t.Errorf("Visible changed its argument: %d objects", len(list))
	}
}
