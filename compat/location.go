package compat

import (
	"fmt"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

// Moved reports whether a query whose checkpoint location was from now names the location to:
// both are set and they are not the same location (file:///a/b and /a/b/ are). A moved query
// is a fresh start at to, unless to already holds its checkpoint: nothing recorded at from is
// judged against.
func Moved(from, to string) bool {
	return from != "" && to != "" && checkpoint.CanonicalLocation(from) != checkpoint.CanonicalLocation(to)
}

// MovedText says what moving a query's checkpoint location from from to to does, for a
// location that holds no checkpoint yet. The admission webhook warns with it on
// spec.checkpoint.location, and lockstep plan --from prints it.
func MovedText(from, to string) string {
	return fmt.Sprintf("changed from %s to %s: the query starts afresh there (new query id, sources from their startingOffsets); the old checkpoint is kept", from, to)
}
