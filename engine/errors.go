package engine

import (
	"errors"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	// ErrRefused means the checkpoint refuses to run this query: it belongs
	// to another query (checkpoint.ErrOwnerMismatch), another writer owns it
	// now (ErrOwnedByAnotherWriter), or the start guard rejected the spec.
	// `lockstep run` exits with code 3 for it.
	ErrRefused = errors.New("the checkpoint refuses this query")

	// ErrOwnedByAnotherWriter means another engine wrote a log entry this
	// one meant to write: two engines run on one checkpoint, and this one
	// stopped. errors.Is(err, ErrRefused) and errors.Is(err,
	// checkpoint.ErrFenced) hold for it too.
	ErrOwnedByAnotherWriter error = &refusal{msg: "checkpoint is owned by another writer"}
)

// refusal is an error that is also ErrRefused.
type refusal struct{ msg string }

func (e *refusal) Error() string        { return e.msg }
func (e *refusal) Is(target error) bool { return target == ErrRefused }

// InvalidSpecError is a query that cannot run as written: every problem,
// with its field path. `lockstep run` exits with code 2 for it.
type InvalidSpecError struct {
	Errs field.ErrorList
}

func (e *InvalidSpecError) Error() string {
	msgs := make([]string, len(e.Errs))
	for i, err := range e.Errs {
		msgs[i] = err.Error()
	}
	return "invalid query: " + strings.Join(msgs, "; ")
}
