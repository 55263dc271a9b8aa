package v1

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
