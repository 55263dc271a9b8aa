package spark

import "time"

// parseRFC3339 parses a timestamp as CEL's timestamp() does.
func parseRFC3339(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) }
