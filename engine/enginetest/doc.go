// Package enginetest helps test the engine and its components: a registry
// with the built-in kinds, an observer that records a run, a fake-clock
// helper, and the conformance suite every exactly-once sink passes
// (RunSinkSuite: "replaying batch N is harmless").
package enginetest
