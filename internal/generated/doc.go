// Package generated holds the test that fails when a generated file checked
// into the repository (deepcopy functions, CRD manifests with their descriptions
// folded by internal/crddesc) is stale. Regenerate them with `make generate`.
package generated
