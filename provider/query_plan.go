package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	fielderr "k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/compat"
)

// ModifyPlan makes the plan tell the truth about the query and its checkpoint. It runs small
// steps, each deciding one thing and stopping the plan when it fails it:
//
//   - planGuarantee: the delivery guarantee, from the spec alone (compat.GuaranteeOf);
//   - planIdentity: the namespace and id; an unknown namespace stays unknown;
//   - planLocationRemoval: an explicit checkpoint.location removed from the configuration
//     makes the location the store's, which the plan shows and judges;
//   - planTakeOver: a new query must not take over one Terraform does not manage, while the
//     create half of a replacement takes over the one it replaces;
//   - checkWithServer: the server-side dry run, in which the admission webhook judges the
//     change against what the checkpoint recorded;
//   - planLocation: the checkpoint location in force after apply;
//   - planCheckpoint: what apply does to the checkpoint — keeps it, resumes from one, starts
//     afresh, or deletes it with a replaced query — read from the real checkpoint;
//   - report: the server's warnings, and a weakened guarantee.
func (r *queryResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || r.kinds.err != nil {
		return // destroy
	}
	p, ok := r.startPlan(ctx, req, resp)
	if !ok {
		return
	}
	for _, step := range []func(context.Context, *queryPlan) bool{
		r.planGuarantee, r.planIdentity, r.planLocationRemoval, r.planTakeOver, r.checkWithServer, r.planLocation, r.planCheckpoint,
	} {
		if !step(ctx, p) || resp.Diagnostics.HasError() {
			return
		}
	}
	r.report(p)
}

// queryPlan is what the steps of ModifyPlan read and decide.
type queryPlan struct {
	req  resource.ModifyPlanRequest
	resp *resource.ModifyPlanResponse

	planned, prior queryMeta
	hasPrior       bool
	planSpec       map[string]any // the planned spec, API form, unknown parts left out
	configKnown    bool           // the configured spec holds no unknown value
	changed        bool           // the spec differs from the prior state's (always, on create)

	// replacing is the query in the cluster that the create half of a replacement takes over
	// (its delete runs first); nil otherwise.
	replacing *unstructured.Unstructured
	// dryRun is the API server's answer to the dry run; nil when there was none.
	dryRun         *unstructured.Unstructured
	serverWarnings []string
	// location is the checkpoint location in force after apply; unknown when the plan cannot
	// tell.
	location types.String
	// fresh is set when the query moves to a new checkpoint location.
	fresh bool
	// removedLocation is the explicit checkpoint.location that the configuration no longer
	// sets; "" otherwise.
	removedLocation string
	// weakened says why the delivery guarantee drops, when it does.
	weakened string
}

func (p *queryPlan) set(ctx context.Context, at path.Path, v any) {
	p.resp.Diagnostics.Append(p.resp.Plan.SetAttribute(ctx, at, v)...)
}

func (p *queryPlan) namespace() string { return p.planned.Namespace.ValueString() }
func (p *queryPlan) name() string      { return p.planned.Name.ValueString() }

// startPlan reads the planned and prior attributes and the planned spec.
func (r *queryResource) startPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) (*queryPlan, bool) {
	p := &queryPlan{req: req, resp: resp, hasPrior: !req.State.Raw.IsNull(), location: types.StringUnknown()}
	resp.Diagnostics.Append(p.planned.get(ctx, req.Plan)...)
	if p.hasPrior {
		resp.Diagnostics.Append(p.prior.get(ctx, req.State)...)
	}
	if resp.Diagnostics.HasError() {
		return nil, false
	}
	var err error
	if _, p.configKnown, err = specOf(r.kinds.query, req.Config.Raw); err != nil {
		resp.Diagnostics.AddError("Internal Error", "Read the configured spec: "+err.Error())
		return nil, false
	}
	if !r.readPlannedSpec(p) {
		return nil, false
	}
	return p, true
}

// readPlannedSpec (re)reads the planned spec from the plan, after a step changed it.
func (r *queryResource) readPlannedSpec(p *queryPlan) bool {
	var err error
	if p.planSpec, _, err = specOf(r.kinds.query, p.resp.Plan.Raw); err != nil {
		p.resp.Diagnostics.AddError("Internal Error", "Read the planned spec: "+err.Error())
		return false
	}
	p.changed = !p.hasPrior || specChanged(r.kinds.query, p.resp.Plan.Raw, p.req.State.Raw)
	return true
}

// planGuarantee plans the delivery guarantee, which follows from the spec alone, and notes
// when a change lowers it.
func (r *queryResource) planGuarantee(ctx context.Context, p *queryPlan) bool {
	if !p.configKnown {
		return true
	}
	typed, err := typedSpec(p.planSpec)
	if err != nil {
		p.resp.Diagnostics.AddError("Internal Error", "Read the planned spec: "+err.Error())
		return false
	}
	g, reason := compat.GuaranteeOf(typed)
	p.set(ctx, path.Root(attrDeliveryGuarantee), string(g))
	p.set(ctx, path.Root(attrDeliveryGuaranteeReason), reason)
	if p.hasPrior && known(p.prior.DeliveryGuarantee) && compat.Weaker(g, v1.Guarantee(p.prior.DeliveryGuarantee.ValueString())) {
		p.weakened = fmt.Sprintf("This change lowers the query's delivery guarantee from %s to %s. %s",
			p.prior.DeliveryGuarantee.ValueString(), g, reason)
	}
	return true
}

// planIdentity plans the namespace and the id. An unset namespace is the provider's; a
// namespace from a value known only after apply stays unknown, and so does everything the
// plan would have asked the cluster.
func (r *queryResource) planIdentity(ctx context.Context, p *queryPlan) bool {
	var configured types.String
	p.resp.Diagnostics.Append(p.req.Config.GetAttribute(ctx, path.Root(attrNamespace), &configured)...)
	if configured.IsNull() && p.planned.Namespace.IsUnknown() && r.cluster != nil {
		p.planned.Namespace = types.StringValue(r.cluster.namespace)
		p.set(ctx, path.Root(attrNamespace), p.planned.Namespace)
	}
	if p.hasPrior && (!p.planned.Name.Equal(p.prior.Name) || !p.planned.Namespace.Equal(p.prior.Namespace)) {
		// A new name or namespace replaces the query: Terraform asks next for the plan of the
		// create half, without a prior state, but shows the warnings of this plan only.
		r.planRenamed(ctx, p)
		return false
	}
	if p.planned.Namespace.IsUnknown() || p.planned.Name.IsUnknown() {
		if p.changed {
			p.resp.Diagnostics.AddWarning("Change Not Checked Against The Checkpoint",
				"The query's namespace or name is known only after apply, so this plan could not ask the cluster "+
					"whether the query's checkpoint allows the change. The admission webhook checks it at apply.")
		}
		return false
	}
	p.planned.ID = types.StringValue(p.namespace() + "/" + p.name())
	p.set(ctx, path.Root(attrID), p.planned.ID)
	return true
}

// planLocationRemoval sees an explicit checkpoint.location removed from the configuration.
// The framework would plan the old value (the attribute is computed), so that the plan says
// "No changes" while the API server, given no location, derives the store's: the plan makes
// the location unknown instead, for the dry run to tell the one in force.
func (r *queryResource) planLocationRemoval(ctx context.Context, p *queryPlan) bool {
	if !p.hasPrior {
		return true
	}
	locPath := path.Root("checkpoint").AtName("location")
	var configured, prior types.String
	p.resp.Diagnostics.Append(p.req.Config.GetAttribute(ctx, locPath, &configured)...)
	p.resp.Diagnostics.Append(p.req.State.GetAttribute(ctx, locPath, &prior)...)
	origin, diags := p.req.Private.GetKey(ctx, privateLocation)
	p.resp.Diagnostics.Append(diags...)
	var o struct {
		Configured bool `json:"configured"`
	}
	if !configured.IsNull() || !known(prior) || json.Unmarshal(origin, &o) != nil || !o.Configured {
		return true
	}
	p.removedLocation = prior.ValueString()
	p.set(ctx, locPath, types.StringUnknown())
	p.set(ctx, path.Root(attrCheckpointLocation), types.StringUnknown())
	return r.readPlannedSpec(p)
}

// noteRemovedLocation warns that removing checkpoint.location moves the query to the
// location its store derives, to.
func (p *queryPlan) noteRemovedLocation(to string) {
	if to == "" {
		to = "the one its checkpoint.store derives"
	}
	p.resp.Diagnostics.AddAttributeWarning(path.Root("checkpoint"), "Checkpoint Location Removed From The Configuration",
		fmt.Sprintf("checkpoint.location = %q is no longer in the configuration, so the API server gives the query the "+
			"location of its checkpoint.store: %s. The query moves there, and the change is judged against the "+
			"checkpoint found there. To stay where it is, keep checkpoint.location = %q in the configuration.",
			p.removedLocation, to, p.removedLocation))
}

// planTakeOver refuses to create a query that exists outside Terraform: server-side apply
// would silently take it over. A query that this provider wrote (its field manager applied
// it) and that a resource of this state holds (its refresh read it in this run) is the one a
// replacement deletes first — terraform plan -replace, a tainted resource — and the create
// half plans over it.
func (r *queryResource) planTakeOver(ctx context.Context, p *queryPlan) bool {
	if p.hasPrior || r.cluster == nil {
		return true
	}
	cur, err := r.cluster.getQuery(ctx, p.namespace(), p.name())
	if err != nil {
		return true // absent; or unreadable, which the dry run reports
	}
	switch {
	case !appliedByProvider(cur):
		p.resp.Diagnostics.AddAttributeError(path.Root(attrName), "Streaming Query Already Exists", alreadyExists(p.namespace(), p.name()))
		return false
	case !r.cluster.isManaged(cur.GetUID()):
		// Written by Terraform, but not by a resource of this state: Terraform refreshes
		// (reads) every resource of the state before it plans, replaced ones included.
		p.resp.Diagnostics.AddAttributeError(path.Root(attrName), "Streaming Query Already Exists", alreadyWritten(p.namespace(), p.name()))
		return false
	}
	p.replacing = cur
	return true
}

// appliedByProvider reports whether this provider wrote the query with server-side apply.
func appliedByProvider(u *unstructured.Unstructured) bool {
	for _, m := range u.GetManagedFields() {
		if m.Manager == FieldManager && m.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

// checkWithServer sends the planned query to the API server as a server-side dry run:
// defaulting, validation and the admission webhook's compat check against the checkpoint.
func (r *queryResource) checkWithServer(ctx context.Context, p *queryPlan) bool {
	switch {
	case !p.changed:
		return true
	case r.cluster == nil:
		p.resp.Diagnostics.AddWarning("Change Not Checked Against The Checkpoint",
			"The lockstep provider's connection settings are known only after apply, so this plan could not ask "+
				"the cluster whether the query's checkpoint allows the change. The admission webhook checks it at apply.")
		return true
	case !p.configKnown:
		p.resp.Diagnostics.AddWarning("Change Not Checked Against The Checkpoint",
			"Some attributes of the query are known only after apply, so this plan could not ask the cluster "+
				"whether the query's checkpoint allows the change. The admission webhook checks it at apply.")
		return true
	}
	spec := r.kinds.query
	wctx, warns := withWarnings(ctx)
	dryRun, err := r.cluster.applyQuery(wctx, queryObject(p.namespace(), p.name(), p.planSpec), true)
	p.serverWarnings = warns.list()
	if loc, goes := r.checkpointGoes(ctx, p); goes {
		// The webhook judged the new query against the checkpoint that the replacement's
		// delete removes first: its findings do not apply to the query that starts there.
		p.serverWarnings = withoutFindings(p.serverWarnings)
		if err = withoutFindingCauses(err); err == nil && dryRun == nil {
			p.location = types.StringValue(loc)
		}
	}
	switch {
	case err == nil:
		p.dryRun = dryRun
	case !p.hasPrior && apierrors.IsNotFound(err):
		// The namespace does not exist yet (it may be created by this same apply).
		p.resp.Diagnostics.AddWarning("Change Not Checked Against The Checkpoint",
			fmt.Sprintf("The cluster could not check the new query: %v. The admission webhook checks it at apply.", err))
	case storeMissing(err) && (!p.hasPrior || !sameStore(ctx, p.req)):
		// The store may be created by this same apply, before the query (depends_on, or a
		// reference to its name).
		p.resp.Diagnostics.AddAttributeWarning(path.Root("checkpoint"), "Checkpoint Store Not Found Yet",
			fmt.Sprintf("CheckpointStore %q does not exist yet, so the plan could not check the query against the "+
				"cluster, and its checkpoint location is known only after apply. If this apply creates the store "+
				"before the query, the admission webhook checks the query then; otherwise the apply fails.", p.plannedStore()))
		p.serverWarnings = nil
	default:
		if p.removedLocation != "" {
			loc, _ := r.cluster.storeLocation(ctx, p.plannedStore(), p.namespace(), p.name())
			p.noteRemovedLocation(loc)
		}
		for _, w := range p.serverWarnings {
			addWarning(&p.resp.Diagnostics, spec, w)
		}
		addAPIError(&p.resp.Diagnostics, spec, fmt.Sprintf("check StreamingQuery %s/%s with a server-side dry run", p.namespace(), p.name()), err)
		return false
	}
	return true
}

// storeMissing reports whether an API error says only that the query's CheckpointStore
// does not exist: one NotFound cause at spec.checkpoint.store.
func storeMissing(err error) bool {
	var se apierrors.APIStatus
	if !errors.As(err, &se) || se.Status().Details == nil {
		return false
	}
	causes := se.Status().Details.Causes
	return len(causes) > 0 && !slices.ContainsFunc(causes, func(c metav1.StatusCause) bool {
		return c.Field != "spec.checkpoint.store" || c.Type != metav1.CauseType(fielderr.ErrorTypeNotFound)
	})
}

// checkpointGoes reports whether the planned query is the create half of a replacement whose
// delete removes the checkpoint at the location the new query uses (retention Delete), and
// returns that location.
func (r *queryResource) checkpointGoes(ctx context.Context, p *queryPlan) (string, bool) {
	if p.replacing == nil || retentionOf(p.replacing) != v1.RetentionDelete {
		return "", false
	}
	oldLoc, _, _ := unstructured.NestedString(p.replacing.Object, "spec", "checkpoint", "location")
	loc, _, _ := unstructured.NestedString(p.planSpec, "checkpoint", "location")
	if loc == "" {
		var err error
		if loc, err = r.cluster.storeLocation(ctx, p.plannedStore(), p.namespace(), p.name()); err != nil {
			return "", false
		}
	}
	return loc, loc == oldLoc
}

// withoutFindings drops the compat findings from admission warnings.
func withoutFindings(warnings []string) []string {
	var out []string
	for _, w := range warnings {
		if _, msg, _ := strings.Cut(w, ": "); !isFinding(msg) {
			out = append(out, w)
		}
	}
	return out
}

// withoutFindingCauses drops the compat refusals from an API error, and returns nil when
// nothing else is left.
func withoutFindingCauses(err error) error {
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Details == nil {
		return err
	}
	st := se.ErrStatus
	var keep []metav1.StatusCause
	for _, c := range st.Details.Causes {
		if !isFinding(c.Message) {
			keep = append(keep, c)
		}
	}
	if len(keep) == 0 {
		return nil
	}
	details := *st.Details
	details.Causes = keep
	st.Details = &details
	return &apierrors.StatusError{ErrStatus: st}
}

func isFinding(text string) bool {
	_, ok := compat.ParseFindingText(text)
	return ok
}

// planLocation plans the checkpoint location in force after apply: the configured one, else
// the one the webhook derived in the dry run, else the prior one when the store is the same.
func (r *queryResource) planLocation(ctx context.Context, p *queryPlan) bool {
	locPath := path.Root("checkpoint").AtName("location")
	var loc types.String
	p.resp.Diagnostics.Append(p.resp.Plan.GetAttribute(ctx, locPath, &loc)...)
	if loc.IsUnknown() {
		switch {
		case known(p.location):
			loc = p.location
		case p.dryRun != nil:
			if l, _, _ := unstructured.NestedString(p.dryRun.Object, "spec", "checkpoint", "location"); l != "" {
				loc = types.StringValue(l)
			}
		case p.hasPrior && p.removedLocation == "" && sameStore(ctx, p.req):
			loc = p.prior.CheckpointLocation
		}
		if known(loc) {
			p.set(ctx, locPath, loc)
		}
	}
	if !loc.IsUnknown() {
		p.set(ctx, path.Root(attrCheckpointLocation), loc)
	}
	p.location = loc
	if p.removedLocation != "" && known(loc) && loc.ValueString() != p.removedLocation {
		p.noteRemovedLocation(loc.ValueString())
	}
	p.fresh = p.hasPrior && known(p.prior.CheckpointLocation) && !loc.IsUnknown() && loc.ValueString() != p.prior.CheckpointLocation.ValueString()
	return true
}

// report adds the admission webhook's warnings and a weakened delivery guarantee.
func (r *queryResource) report(p *queryPlan) {
	for _, w := range p.serverWarnings {
		f, isFinding := compat.ParseFindingText(w)
		if (p.fresh || p.replacing != nil) && !isFinding && warningField(w) == "spec.checkpoint.location" {
			continue // the webhook's note of a new location: the plan's own warning says what happens
		}
		if isFinding && f.Rule == compat.RuleSinkGuarantee {
			p.weakened = "" // the checkpoint's own finding says it, with the remedy
		}
		addWarning(&p.resp.Diagnostics, r.kinds.query, w)
	}
	if p.weakened != "" {
		p.resp.Diagnostics.AddAttributeWarning(path.Root("sink"), "Delivery Guarantee Weakens", p.weakened)
	}
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
