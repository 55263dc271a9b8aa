package source

import (
	"encoding/json"
	"fmt"

	"github.com/lockstep-dev/lockstep/engine"
)

// parseOffset reads a generated source's JSON offset (kind names the source in
// the error); an empty offset, the stream's start, is T's zero value.
func parseOffset[T any](kind string, o engine.Offset) (T, error) {
	var off T
	if len(o) == 0 {
		return off, nil
	}
	if err := json.Unmarshal(o, &off); err != nil {
		return off, fmt.Errorf("%s offset %s: %w", kind, o, err)
	}
	return off, nil
}

// parseRange reads both ends of a read request's range with parseOffset.
func parseRange[T any](kind string, req engine.ReadRequest) (start, end T, err error) {
	if start, err = parseOffset[T](kind, req.Start); err != nil {
		return start, end, err
	}
	end, err = parseOffset[T](kind, req.End)
	return start, end, err
}
