package main

import (
	"os"
	"os/signal"
	"syscall"
)

// stopOnSignals makes the first SIGINT or SIGTERM stop the query at a batch
// boundary (after calling first) and the second exit the process at once
// (after calling second); recovery replays the interrupted batch. The
// returned function stops listening and ends the goroutine; call it when the
// run returns.
func stopOnSignals(stop func(), first, second func()) (release func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
		case <-done:
			return
		}
		first()
		stop()
		select {
		case <-sigs:
		case <-done:
			return
		}
		second()
		os.Exit(exitFailure)
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}
}
