package testenv

import (
	"slices"
	"testing"
)

// TestSplitRule splits iptables-save rules as iptables -D needs them: the CNI plugin's
// comments are quoted with escaped quotes inside.
func TestSplitRule(t *testing.T) {
	rule := `POSTROUTING -s 10.244.0.5/32 -m comment --comment "name: \"lockstep-e2e\" id: \"abc\"" -j CNI-1234`
	want := []string{"POSTROUTING", "-s", "10.244.0.5/32", "-m", "comment", "--comment", `name: "lockstep-e2e" id: "abc"`, "-j", "CNI-1234"}
	if got := splitRule(rule); !slices.Equal(got, want) {
		t.Errorf("splitRule = %q, want %q", got, want)
	}
}

// TestUnescapeMount decodes mountinfo's octal escapes.
func TestUnescapeMount(t *testing.T) {
	if got := unescapeMount(`/tmp/a\040b/c`); got != "/tmp/a b/c" {
		t.Errorf("unescapeMount = %q", got)
	}
}

// TestFreePortsDiffer: the ports freePorts finds in one call are all different, however many
// are asked for (a broker's four listeners once got one port twice).
func TestFreePortsDiffer(t *testing.T) {
	for range 50 {
		ports, err := freePorts("127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for _, p := range ports {
			if seen[p] {
				t.Fatalf("freePorts gave port %d twice: %v", p, ports)
			}
			seen[p] = true
		}
	}
}
