// Package layers holds the test that keeps the project's packages in their layers (DESIGN.md
// §6): the spec and the plan below everything that runs them, compat and checkpoint knowing
// no cluster and no Terraform, the runtimes below the controller, the provider and the binary,
// and internal/ below all of them.
package layers
