// Package provider is Lockstep's Terraform provider (terraform-plugin-framework, protocol 6):
// the resource lockstep_streaming_query and the data sources lockstep_streaming_query and
// lockstep_checkpoint_store. Command terraform-provider-lockstep serves it; [New] makes it.
//
// # One model of a query
//
// The resource's attributes mirror api/v1's StreamingQuerySpec in snake_case. They are not
// written by hand: the provider embeds the CRDs that controller-gen makes from the api/v1
// types (crds/, copied from config/crd/bases by go generate) and derives from their OpenAPI
// schema a tree of fields (fields.go) that gives the Terraform schema — nesting, required and
// optional, descriptions, the CRD's defaults, and validators for enums, patterns, ranges,
// sizes and one-of rules — and the conversions between Terraform values and API objects
// (values.go). Tests walk the Go types with reflect to check that every field is represented
// and that a fully populated spec survives spec → Terraform → spec.
//
// # Writing
//
// Create and update use server-side apply under the field manager [FieldManager], forcing
// ownership: the configuration wins over edits made with kubectl. Fields that another manager
// set and the configuration leaves unset survive an apply; then the provider writes instead
// the apply's result (a server-side dry run) without them, as one update (leftovers.go), so
// that out-of-band changes show in the next plan, the apply undoes them, and the engine
// restarts once. Read removes a query that is gone from state, and after an import records
// all of the object; delete tolerates a query that is already gone.
//
// # Planning
//
// ModifyPlan (query_plan.go) runs small steps, each named for what it decides: the delivery
// guarantee (compat.GuaranteeOf, weaker by compat.Weaker, the one ranking); the identity (an
// unknown namespace stays unknown); a removed explicit checkpoint.location; the take-over
// check (the create half of a replacement takes over the query it replaces, nothing else);
// the server-side dry run, in which the API server runs the CRD's validation and the
// admission webhooks judge the change against the query's checkpoint (compat.Check) — a
// refusal is an error on the attribute the finding names, laid out as rule, change, reason and
// remedy, admission warnings are warnings with one summary per rule; the location in force;
// and what apply does to the checkpoint (kept, fresh start, resumed, deleted with a replaced
// query), read from the real checkpoint with the store's credentials (checkpoint_read.go). See
// docs/terraform/ for the user's view.
package provider
