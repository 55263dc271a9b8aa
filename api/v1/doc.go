// Package v1 holds the Lockstep API, group streaming.lockstep.dev, version v1: the
// StreamingQuery that users write and the cluster-scoped CheckpointStore that a platform
// team offers to its tenants.
//
// There is one model of a query: the engine, the controller, the admission webhook, the
// Terraform provider and the CLI all read [StreamingQuerySpec]. This package also holds
// everything about a spec that needs no I/O:
//
//   - [ReadQuery] and [ParseQuery] read a manifest strictly (an unknown field is an error)
//     and apply the defaults of [StreamingQuery.Default].
//   - [StreamingQuerySpec.Validate] returns every problem of a spec with its field path.
//   - [StreamingQuerySpec.Flow] follows the columns and the event-time column from the
//     sources through every transform step to the sink.
//
// Both take an [Expressions] that checks the CEL expressions of filter and select steps: the
// plan package implements it (plan.Validate, plan.Build), so that a client of the API types
// does not link an expression compiler. Besides apimachinery, the package imports
// sigs.k8s.io/yaml and sigs.k8s.io/json (strict reading, as the API server does),
// and the types of k8s.io/api/core/v1 that [EngineSpec] shares with every pod spec
// (tolerations, affinity, envFrom, object references): users write them as in any pod.
//
// The user-facing description of every field is docs/spec.md.
//
// +kubebuilder:object:generate=true
// +groupName=streaming.lockstep.dev
package v1
