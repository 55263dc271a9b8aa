package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/compat"
)

// ModifyPlan makes the plan tell the truth about the checkpoint. It sends the planned query
// to the API server as a server-side dry run, so that the admission webhook judges the change
// against what the query's checkpoint recorded: a refusal fails the plan on the attribute it
// names, with the rule, the old and new values and the remedy; warnings become warning
// diagnostics. It also plans the delivery guarantee (compat.GuaranteeOf, which needs no
// cluster), the checkpoint location the webhook derives, and a changed checkpoint location as
// a fresh start: a new query id, said in a warning, never a silent replacement.
func (r *queryResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || r.kinds.err != nil {
		return // destroy
	}
	var planned, prior queryMeta
	resp.Diagnostics.Append(planned.get(ctx, req.Plan)...)
	hasPrior := !req.State.Raw.IsNull()
	if hasPrior {
		resp.Diagnostics.Append(prior.get(ctx, req.State)...)
	}
	if resp.Diagnostics.HasError() {
		return
	}
	spec := r.kinds.query

	if planned.Namespace.IsUnknown() && r.cluster != nil {
		planned.Namespace = types.StringValue(r.cluster.namespace)
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root(attrNamespace), planned.Namespace)...)
	}
	if planned.Namespace.IsUnknown() || planned.Name.IsUnknown() {
		return
	}
	if known(planned.Name) {
		planned.ID = types.StringValue(planned.Namespace.ValueString() + "/" + planned.Name.ValueString())
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root(attrID), planned.ID)...)
	}

	_, configKnown, err := specOf(spec, req.Config.Raw)
	if err != nil {
		resp.Diagnostics.AddError("Internal Error", "Read the configured spec: "+err.Error())
		return
	}
	planSpec, _, err := specOf(spec, req.Plan.Raw)
	if err != nil {
		resp.Diagnostics.AddError("Internal Error", "Read the planned spec: "+err.Error())
		return
	}
	changed := !hasPrior || specChanged(spec, req.Plan.Raw, req.State.Raw)
	var weakened string // why the delivery guarantee drops, when it does

	// The delivery guarantee follows from the spec alone.
	if configKnown {
		typed, err := typedSpec(planSpec)
		if err != nil {
			resp.Diagnostics.AddError("Internal Error", "Read the planned spec: "+err.Error())
			return
		}
		g, reason := compat.GuaranteeOf(typed)
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root(attrDeliveryGuarantee), string(g))...)
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root(attrDeliveryGuaranteeReason), reason)...)
		if hasPrior && known(prior.DeliveryGuarantee) && guaranteeRank(g) < guaranteeRank(v1.Guarantee(prior.DeliveryGuarantee.ValueString())) {
			weakened = fmt.Sprintf("This change lowers the query's delivery guarantee from %s to %s. %s",
				prior.DeliveryGuarantee.ValueString(), g, reason)
		}
	}

	// A new query must not take over one that exists outside Terraform.
	if !hasPrior && r.cluster != nil && known(planned.Name) {
		_, err := r.cluster.getQuery(ctx, planned.Namespace.ValueString(), planned.Name.ValueString())
		if err == nil {
			resp.Diagnostics.AddAttributeError(path.Root(attrName), "Streaming Query Already Exists",
				alreadyExists(planned.Namespace.ValueString(), planned.Name.ValueString()))
			return
		}
	}

	// Ask the API server: defaulting, validation and the admission webhook's compat check.
	var dryRun *unstructured.Unstructured
	var serverWarnings []string
	switch {
	case !changed:
	case r.cluster == nil:
		resp.Diagnostics.AddWarning("Change Not Checked Against The Checkpoint",
			"The lockstep provider's connection settings are known only after apply, so this plan could not ask "+
				"the cluster whether the query's checkpoint allows the change. The admission webhook checks it at apply.")
	case !configKnown:
		resp.Diagnostics.AddWarning("Change Not Checked Against The Checkpoint",
			"Some attributes of the query are known only after apply, so this plan could not ask the cluster "+
				"whether the query's checkpoint allows the change. The admission webhook checks it at apply.")
	default:
		namespace, name := planned.Namespace.ValueString(), planned.Name.ValueString()
		wctx, warns := withWarnings(ctx)
		dryRun, err = r.cluster.applyQuery(wctx, queryObject(namespace, name, planSpec), true)
		serverWarnings = warns.list()
		switch {
		case err == nil:
		case !hasPrior && apierrors.IsNotFound(err):
			// The namespace does not exist yet (it may be created by this same apply).
			dryRun = nil
			resp.Diagnostics.AddWarning("Change Not Checked Against The Checkpoint",
				fmt.Sprintf("The cluster could not check the new query: %v. The admission webhook checks it at apply.", err))
		default:
			for _, w := range serverWarnings {
				addWarning(&resp.Diagnostics, spec, w)
			}
			addAPIError(&resp.Diagnostics, spec, fmt.Sprintf("check StreamingQuery %s/%s with a server-side dry run", namespace, name), err)
			return
		}
	}

	// The checkpoint location in force after apply.
	locPath := path.Root("checkpoint").AtName("location")
	var loc types.String
	resp.Diagnostics.Append(resp.Plan.GetAttribute(ctx, locPath, &loc)...)
	if loc.IsUnknown() {
		switch {
		case dryRun != nil:
			if l, _, _ := unstructured.NestedString(dryRun.Object, "spec", "checkpoint", "location"); l != "" {
				loc = types.StringValue(l)
			}
		case hasPrior && sameStore(ctx, req):
			loc = prior.CheckpointLocation
		}
		if known(loc) {
			resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, locPath, loc)...)
		}
	}
	if !loc.IsUnknown() {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root(attrCheckpointLocation), loc)...)
	}

	fresh := hasPrior && known(prior.CheckpointLocation) && !loc.IsUnknown() && loc.ValueString() != prior.CheckpointLocation.ValueString()
	for _, w := range serverWarnings {
		f, isFinding := parseFinding(w)
		if fresh && !isFinding && warningField(w) == "spec.checkpoint.location" {
			continue // the webhook's note of the new location: the fresh-start warning below says more
		}
		if isFinding && f.rule == ruleSinkGuarantee {
			weakened = "" // the checkpoint's own finding says it, with the remedy
		}
		addWarning(&resp.Diagnostics, spec, w)
	}
	if weakened != "" {
		resp.Diagnostics.AddAttributeWarning(path.Root("sink"), "Delivery Guarantee Weakens", weakened)
	}
	if !hasPrior {
		return
	}
	if !fresh {
		if known(prior.QueryID) {
			resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root(attrQueryID), prior.QueryID)...)
		}
		return
	}
	// A new location is a new checkpoint: plan it as the fresh start it is.
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root(attrQueryID), types.StringUnknown())...)
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root(attrLatestCommittedBatch), types.Int64Unknown())...)
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root(attrPhase), types.StringUnknown())...)
	resp.Diagnostics.AddAttributeWarning(diagnosticPath(locPath), "Query Starts Afresh", freshStartDetail(prior.CheckpointLocation.ValueString(), loc.ValueString()))
}

// ruleSinkGuarantee is the compat rule that warns of a weaker delivery guarantee; when the
// webhook reports it, the plan's own warning would repeat it.
const ruleSinkGuarantee = "sink-guarantee"

// freshStartDetail explains a changed checkpoint location.
func freshStartDetail(from, to string) string {
	if to == "" {
		to = "(none)"
	}
	return fmt.Sprintf("checkpoint.location changes from %s to %s. This is a fresh start, planned as an in-place "+
		"update (the query is not replaced): the query gets a new query id and its sources are read again from "+
		"their starting positions (startingOffsets), so the sink receives their data again. The checkpoint at %s "+
		"is kept; setting the location back continues from it.", from, to, from)
}

// warningField returns the field path of an admission warning, "<path>: <text>".
func warningField(warning string) string {
	for i := 0; i+1 < len(warning); i++ {
		if warning[i] == ':' && warning[i+1] == ' ' {
			return warning[:i]
		}
	}
	return ""
}

// specChanged reports whether the spec attributes of the plan differ from the state's.
func specChanged(spec *field, plan, state tftypes.Value) bool {
	p, err1 := rootAttributes(plan)
	s, err2 := rootAttributes(state)
	if err1 != nil || err2 != nil {
		return true
	}
	for _, c := range spec.Fields {
		if !p[c.TF].Equal(s[c.TF]) {
			return true
		}
	}
	return false
}

// sameStore reports whether the configured checkpoint store is the one in state, so that the
// location the webhook derived from it stays.
func sameStore(ctx context.Context, req resource.ModifyPlanRequest) bool {
	var planStore, stateStore types.String
	storePath := path.Root("checkpoint").AtName("store")
	if req.Plan.GetAttribute(ctx, storePath, &planStore).HasError() || req.State.GetAttribute(ctx, storePath, &stateStore).HasError() {
		return false
	}
	return !planStore.IsUnknown() && planStore.Equal(stateStore)
}

func guaranteeRank(g v1.Guarantee) int {
	switch g {
	case v1.GuaranteeExactlyOnce:
		return 2
	case v1.GuaranteeAtLeastOnce:
		return 1
	}
	return 0
}
