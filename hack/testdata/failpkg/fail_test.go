// Package failpkg fails on purpose: charts' TestMakeTestNamesWhatFailed runs hack/test.sh on it.
package failpkg

import "testing"

func TestPasses(t *testing.T) {}

func TestFails(t *testing.T) { t.Fatal("failing on purpose") }
