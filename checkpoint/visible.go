package checkpoint

import "strings"

// hidden reports whether a key names a file that readers of a data folder skip: one whose
// name, or the name of a folder on its path, starts with "." or "_" (as Spark's file source
// does; the files sink keeps its manifest in _lockstep_manifest).
func hidden(key string) bool {
	for elem := range strings.SplitSeq(key, "/") {
		if strings.HasPrefix(elem, ".") || strings.HasPrefix(elem, "_") {
			return true
		}
	}
	return false
}

// Visible returns the objects of list whose keys are not hidden, in list's order.
func Visible(list []ObjectInfo) []ObjectInfo {
	out := list[:0:0]
	for _, o := range list {
		if !hidden(o.Key) {
			out = append(out, o)
		}
	}
	return out
}
