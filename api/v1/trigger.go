package v1

import "time"

// Name names the trigger as the engine's start event, its metrics' trigger label and the
// query's page show it: "availableNow", "once", "processingTime=<as written>" or "default"
// (as fast as possible).
func (t Trigger) Name() string {
	switch {
	case t.Once:
		return "once"
	case t.AvailableNow:
		return "availableNow"
	case t.ProcessingTime != "":
		return "processingTime=" + string(t.ProcessingTime)
	}
	return "default"
}

// Interval is the processingTime trigger's interval, 0 for another trigger (and for an
// interval Validate refuses).
func (t Trigger) Interval() time.Duration {
	d, err := t.ProcessingTime.Parse()
	if err != nil {
		return 0
	}
	return d
}
