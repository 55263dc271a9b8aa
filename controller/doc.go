// Package controller runs StreamingQuery objects on Kubernetes: the reconciler that turns a
// query into an engine Deployment and reports its progress from the checkpoint, and the
// admission webhooks that refuse unsafe changes before they are stored.
//
// # Reconciler
//
// [QueryReconciler] renders, for each query, a ConfigMap holding the query as the engine reads
// it (spec plus the checkpoint location, store settings) and a Deployment (one replica,
// Recreate, so the old engine stops at a batch boundary before the new one starts) that runs
// `lockstep engine` with the store's credentials from the query's namespace. Before a spec
// change reaches the ConfigMap it is checked with compat against the committed batches' shape in the
// checkpoint: a rejected change sets Compatible=False and the previous spec keeps running.
// Status is read from the checkpoint (query id, batches, progress, lag) and from the engine
// pod (restarts, termination message), and refreshed every [WithResync] interval. A refresh
// reads two small objects of a checkpoint it has read before (the next entry of each log; see
// poll.go), and its reads are bounded by [WithReadBudget].
//
// # Stores
//
// [StoreReconciler] keeps each CheckpointStore's status: Ready from a probe made as an engine
// opens the store (a listing and a create-if-absent that must be refused the second time),
// with the credentials of a namespace the store allows, and the reason when it fails; the
// number of queries that name it; and the in-use finalizer [StoreFinalizer], released when no
// query names the store. The QueryReconciler stops the engines of queries whose store is being
// deleted, gone, or no longer allows their namespace (phase Blocked, no replica), and starts
// them again when it does.
//
// # Webhooks
//
// [QueryWebhook] defaults the checkpoint location from the store's template and validates a
// query: its spec ([v1.StreamingQuerySpec.Validate]), its placement ([ValidatePlacement]:
// allowed namespace, location under the namespace's prefix, no shared or nested locations)
// and, on update, compat against the checkpoint. Findings that compat allows with a warning
// become admission warnings; rejected ones are a Forbidden field error naming the rule, the
// old and new values and the remedy. The checkpoint reads of one request are bounded by
// [WithCheckpointBudget]: a store that does not answer in time admits the change with a
// warning that it was not judged, and the controller judges it before the engine runs it.
//
// See docs/kubernetes.md for installation and the meaning of each condition.
package controller
