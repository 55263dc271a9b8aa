// Package v1 holds the Lockstep API, group streaming.lockstep.dev, version v1: the
// StreamingQuery that users write and the cluster-scoped CheckpointStore that a platform
// team offers to its tenants.
//
// There is one model of a query: the engine, the controller, the admission webhook, the
// Terraform provider and the CLI all read [StreamingQuerySpec]. This package also holds what
// needs neither I/O nor type inference:
//
//   - [ReadQuery] and [ParseQuery] read a manifest strictly (an unknown field is an error)
//     and apply the defaults of [StreamingQuery.Default].
//   - [StreamingQuerySpec.Validate] returns every problem the spec's fields show by
//     themselves, with its field path: names, one-of and required fields, enums, ranges,
//     durations, paths and URLs, the order of the steps.
//   - [Source.Columns] and [Join.RightColumns] say what a source or a static side yields.
//
// Following the columns, their types and the event time through the steps, and compiling
// the CEL expressions of filter and select steps, is the plan package's (plan.Validate,
// plan.Build), which imports this one: a client of the API types does not link an
// expression compiler. Besides apimachinery, the package imports
// sigs.k8s.io/yaml and sigs.k8s.io/json (strict reading, as the API server does),
// and the types of k8s.io/api/core/v1 that [EngineSpec] shares with every pod spec
// (tolerations, affinity, envFrom, object references): users write them as in any pod.
//
// The user-facing description of every field is docs/spec.md.
//
// +kubebuilder:object:generate=true
// +groupName=streaming.lockstep.dev
package v1
