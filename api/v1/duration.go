package v1

import (
	"fmt"
	"time"
)

// Duration is a length of time written as a Go duration string: "500ms", "30s", "10m",
// "1h30m". Units are ns, us, ms, s, m, h; there are no days (write 24h). Spark's interval
// forms such as "10 minutes" are not accepted.
type Duration string

// Parse returns the duration d stands for. The empty Duration is 0. A negative duration is an
// error: no duration in a spec may be negative.
func (d Duration) Parse() (time.Duration, error) {
	if d == "" {
		return 0, nil
	}
	v, err := time.ParseDuration(string(d))
	if err != nil {
		return 0, fmt.Errorf("parse duration %q: want a Go duration such as 30s, 10m or 1h", string(d))
	}
	if v < 0 {
		return 0, fmt.Errorf("duration %q is negative", string(d))
	}
	return v, nil
}
