package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// This file holds the step of ModifyPlan that says what apply does to the checkpoint, read
// from the real one (checkpoint_read.go).

// planCheckpoint plans what apply does to the checkpoint, read from the real one where it
// matters: an update that keeps the location keeps the query id; a new location starts
// afresh, unless it holds this query's checkpoint, from which the query resumes; a replacement
// deletes or keeps the old checkpoint as its retention says; a new query over a retained
// checkpoint of the same name resumes from it.
func (r *queryResource) planCheckpoint(ctx context.Context, p *queryPlan) bool {
	switch {
	case p.replacing != nil:
		r.planReplacement(ctx, p)
	case !p.hasPrior:
		r.planNewQuery(ctx, p)
	case !p.fresh:
		if known(p.prior.QueryID) {
			p.set(ctx, path.Root(attrQueryID), p.prior.QueryID)
		}
	default:
		r.planMove(ctx, p)
	}
	return true
}

// plannedStore is the planned checkpoint.store; "" when unset or unknown.
func (p *queryPlan) plannedStore() string {
	s, _, _ := unstructured.NestedString(p.planSpec, "checkpoint", "store")
	return s
}

// checkpointAt reads the checkpoint the planned query would use at location.
func (r *queryResource) checkpointAt(ctx context.Context, namespace, store, location string) (checkpointFacts, error) {
	if r.cluster == nil {
		return checkpointFacts{Location: location}, fmt.Errorf("the provider's connection settings are known only after apply")
	}
	return r.cluster.readCheckpoint(ctx, namespace, store, location)
}

// resumes plans the query id of a query that resumes from the checkpoint facts describes,
// and says how it continues.
func (p *queryPlan) resumes(ctx context.Context, f checkpointFacts) string {
	p.set(ctx, path.Root(attrQueryID), stringOrNull(f.QueryID))
	next := "batch 0 (it has no committed batch yet)"
	if f.Committed != nil {
		next = fmt.Sprintf("batch %d", *f.Committed+1)
	}
	return fmt.Sprintf("the query resumes from it: its query id is %s, its next batch is %s, and its sources continue "+
		"from the offsets recorded there, not from startingOffsets. The admission webhook judged the spec against "+
		"what that checkpoint recorded.", f.QueryID, next)
}

// startsAfresh is what a fresh start does, for a diagnostic.
const startsAfresh = "the query starts afresh: it gets a new query id and its sources are read again from their " +
	"starting positions (startingOffsets), so the sink receives their data again."

// planNewQuery says when a new query resumes from a checkpoint that its predecessor of the
// same name left (retention Retain). A location without a checkpoint needs no words.
func (r *queryResource) planNewQuery(ctx context.Context, p *queryPlan) {
	if !known(p.location) {
		return
	}
	f, err := r.checkpointAt(ctx, p.namespace(), p.plannedStore(), p.location.ValueString())
	if err != nil || !f.ownedBy(p.namespace(), p.name()) {
		return // nothing there (or the webhook refused another query's checkpoint); unreadable: the webhook warned
	}
	p.resp.Diagnostics.AddAttributeWarning(path.Root("checkpoint"), "Query Resumes From A Retained Checkpoint",
		fmt.Sprintf("No StreamingQuery %s/%s exists, but %s holds the checkpoint a query of that name left when it was "+
			"deleted with checkpoint.retention = \"Retain\" (%s). Creating it is not a fresh start: %s "+
			"To start afresh instead, give the query a new checkpoint.location.",
			p.namespace(), p.name(), f.Location, f.progress(), p.resumes(ctx, f)))
}

// planMove plans a changed checkpoint location: a fresh start, or, where the new location
// already holds this query's checkpoint (moving back), a resumption from it.
func (r *queryResource) planMove(ctx context.Context, p *queryPlan) {
	p.set(ctx, path.Root(attrQueryID), types.StringUnknown())
	p.set(ctx, path.Root(attrLatestCommittedBatch), types.Int64Unknown())
	p.set(ctx, path.Root(attrPhase), types.StringUnknown())
	from, to := p.prior.CheckpointLocation.ValueString(), p.location.ValueString()
	lead := fmt.Sprintf("checkpoint.location changes from %s to %s, planned as an in-place update (the query is not replaced). ", from, to)
	kept := fmt.Sprintf(" The checkpoint at %s is kept; setting the location back resumes from it.", from)
	f, err := r.checkpointAt(ctx, p.namespace(), p.plannedStore(), to)
	switch {
	case err != nil:
		p.resp.Diagnostics.AddAttributeWarning(path.Root("checkpoint"), "Query Starts Afresh Or Resumes",
			lead+fmt.Sprintf("The plan could not read the checkpoint at %s (%v). If it holds this query's checkpoint, "+
				"the query resumes from it; otherwise %s", to, err, startsAfresh)+kept)
	case f.ownedBy(p.namespace(), p.name()):
		p.resp.Diagnostics.AddAttributeWarning(path.Root("checkpoint"), "Query Resumes From The Checkpoint At Its New Location",
			lead+fmt.Sprintf("%s already holds this query's checkpoint (%s), so it is not a fresh start: %s", to, f.progress(), p.resumes(ctx, f))+kept)
	default:
		p.resp.Diagnostics.AddAttributeWarning(path.Root("checkpoint"), "Query Starts Afresh",
			lead+"There is no checkpoint there yet, so "+startsAfresh+kept)
	}
}

// planReplacement says what a replacement does to the checkpoint: the delete applies the
// old query's retention (Delete removes its checkpoint, Retain keeps it), and the new query
// resumes from a checkpoint of its own at its location, or starts afresh. Terraform shows
// the warnings of the first plan of a replacement only: that is the create half for a tainted
// resource, and the update plan for a new name or namespace (planRenamed); for -replace, the
// planned query_id (known, or known after apply) says it.
func (r *queryResource) planReplacement(ctx context.Context, p *queryPlan) {
	p.resp.Diagnostics.Append(r.describeReplacement(ctx, p, p.replacing, p.location)...)
}

// planRenamed says, in the update plan of a query whose name or namespace changes, what the
// replacement that follows does.
func (r *queryResource) planRenamed(ctx context.Context, p *queryPlan) {
	if r.cluster == nil || !known(p.planned.Namespace) || !known(p.planned.Name) {
		return
	}
	old, err := r.cluster.getQuery(ctx, p.prior.Namespace.ValueString(), p.prior.Name.ValueString())
	if err != nil {
		return
	}
	loc, _, _ := unstructured.NestedString(p.planSpec, "checkpoint", "location")
	if loc == "" {
		loc, _ = r.cluster.storeLocation(ctx, p.plannedStore(), p.namespace(), p.name())
	}
	p.resp.Diagnostics.Append(r.describeReplacement(ctx, p, old, stringOrUnknown(loc))...)
}

func stringOrUnknown(s string) types.String {
	if s == "" {
		return types.StringUnknown()
	}
	return types.StringValue(s)
}

// describeReplacement is the warning of planReplacement, for the replaced query old and the
// new query's location newLoc. It plans the new query's id as it says.
func (r *queryResource) describeReplacement(ctx context.Context, p *queryPlan, old *unstructured.Unstructured, newLoc types.String) diag.Diagnostics {
	var diags diag.Diagnostics
	oldLoc, _, _ := unstructured.NestedString(old.Object, "spec", "checkpoint", "location")
	oldStore, _, _ := unstructured.NestedString(old.Object, "spec", "checkpoint", "store")
	retention := retentionOf(old)
	var b strings.Builder
	if old.GetNamespace() == p.namespace() && old.GetName() == p.name() {
		fmt.Fprintf(&b, "StreamingQuery %s/%s is replaced: Terraform deletes it, then creates it again (a new Kubernetes UID). ", p.namespace(), p.name())
	} else {
		fmt.Fprintf(&b, "StreamingQuery %s/%s is replaced by %s/%s: Terraform deletes the old one, then creates the new one. ",
			old.GetNamespace(), old.GetName(), p.namespace(), p.name())
	}
	f0, err0 := r.checkpointAt(ctx, old.GetNamespace(), oldStore, oldLoc)
	what := f0.progress()
	switch {
	case err0 != nil:
		what = fmt.Sprintf("the plan could not read it: %v", err0)
	case !f0.Exists:
		what = "no checkpoint written yet"
	case f0.QueryID != "":
		what = "query id " + f0.QueryID + ", " + what
	}
	sameLoc := known(newLoc) && newLoc.ValueString() == oldLoc
	unknownID := func() { p.set(ctx, path.Root(attrQueryID), types.StringUnknown()) }
	if retention == v1.RetentionDelete {
		fmt.Fprintf(&b, "Its checkpoint.retention is \"Delete\", so the delete removes its checkpoint at %s (%s). ", oldLoc, what)
		if sameLoc {
			b.WriteString("At that location " + startsAfresh)
			unknownID()
			diags.AddAttributeWarning(path.Root(attrName), "Query Is Replaced And Its Checkpoint Deleted", b.String())
			return diags
		}
	} else {
		fmt.Fprintf(&b, "Its checkpoint.retention is \"Retain\", so its checkpoint at %s is kept (%s). ", oldLoc, what)
	}
	owned := func(f checkpointFacts) bool { return f.ownedBy(p.namespace(), p.name()) }
	switch {
	case !known(newLoc):
		b.WriteString("The new query's checkpoint location is known only after apply: it resumes from a checkpoint of this query found there, else " + startsAfresh)
		unknownID()
	case sameLoc && err0 == nil && owned(f0):
		b.WriteString("The new query uses the same location, so " + p.resumes(ctx, f0))
	default:
		loc := newLoc.ValueString()
		f1, err1 := r.checkpointAt(ctx, p.namespace(), p.plannedStore(), loc)
		switch {
		case err1 != nil:
			fmt.Fprintf(&b, "The plan could not read the checkpoint at %s (%v): if it holds this query's checkpoint, the query resumes from it; otherwise %s", loc, err1, startsAfresh)
			unknownID()
		case owned(f1):
			fmt.Fprintf(&b, "The new query's location, %s, holds this query's checkpoint (%s), so %s", loc, f1.progress(), p.resumes(ctx, f1))
		default:
			fmt.Fprintf(&b, "The new query's location, %s, holds no checkpoint of it, so %s", loc, startsAfresh)
			unknownID()
		}
	}
	diags.AddAttributeWarning(path.Root(attrName), "Query Is Replaced", b.String())
	return diags
}
