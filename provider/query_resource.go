package provider

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-dev/lockstep/compat"
)

var (
	_ resource.Resource                = (*queryResource)(nil)
	_ resource.ResourceWithConfigure   = (*queryResource)(nil)
	_ resource.ResourceWithImportState = (*queryResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*queryResource)(nil)
)

// Attributes of lockstep_streaming_query besides the spec's.
const (
	attrID                      = "id"
	attrNamespace               = "namespace"
	attrName                    = "name"
	attrUID                     = "uid"
	attrQueryID                 = "query_id"
	attrPhase                   = "phase"
	attrCheckpointLocation      = "checkpoint_location"
	attrLatestCommittedBatch    = "latest_committed_batch"
	attrDeliveryGuarantee       = "delivery_guarantee"
	attrDeliveryGuaranteeReason = "delivery_guarantee_reason"
	attrWaitFor                 = "wait_for"
	attrTimeouts                = "timeouts"
)

// What apply waits for (wait_for).
const (
	waitNothing        = "nothing"
	waitRunning        = "running"
	waitCommittedBatch = "committed_batch"
	waitCaughtUp       = "caught_up"
)

// Default timeouts of the waits.
const (
	defaultWaitTimeout   = 10 * time.Minute
	defaultDeleteTimeout = 5 * time.Minute
)

// queryMeta holds the attributes of the resource that are not the spec.
type queryMeta struct {
	ID                      types.String
	Namespace               types.String
	Name                    types.String
	UID                     types.String
	QueryID                 types.String
	Phase                   types.String
	CheckpointLocation      types.String
	LatestCommittedBatch    types.Int64
	DeliveryGuarantee       types.String
	DeliveryGuaranteeReason types.String
	WaitFor                 types.String
	Timeouts                timeouts.Value
}

func (m *queryMeta) fields() map[string]any {
	return map[string]any{
		attrID: &m.ID, attrNamespace: &m.Namespace, attrName: &m.Name, attrUID: &m.UID,
		attrQueryID: &m.QueryID, attrPhase: &m.Phase, attrCheckpointLocation: &m.CheckpointLocation,
		attrLatestCommittedBatch: &m.LatestCommittedBatch, attrDeliveryGuarantee: &m.DeliveryGuarantee,
		attrDeliveryGuaranteeReason: &m.DeliveryGuaranteeReason, attrWaitFor: &m.WaitFor, attrTimeouts: &m.Timeouts,
	}
}

func (m *queryMeta) get(ctx context.Context, src attributeGetter) diag.Diagnostics {
	var diags diag.Diagnostics
	for name, target := range m.fields() {
		diags.Append(src.GetAttribute(ctx, path.Root(name), target)...)
	}
	return diags
}

func (m *queryMeta) set(ctx context.Context, dst attributeSetter) diag.Diagnostics {
	var diags diag.Diagnostics
	for name, target := range m.fields() {
		switch v := target.(type) {
		case *types.String:
			diags.Append(dst.SetAttribute(ctx, path.Root(name), *v)...)
		case *types.Int64:
			diags.Append(dst.SetAttribute(ctx, path.Root(name), *v)...)
		case *timeouts.Value:
			diags.Append(dst.SetAttribute(ctx, path.Root(name), *v)...)
		default:
			// A new attribute of another type must be added here, or it would never be saved.
			diags.AddError("Provider bug", fmt.Sprintf("queryMeta.set cannot save attribute %s of type %T", name, target))
		}
	}
	return diags
}

// queryResource is lockstep_streaming_query.
type queryResource struct {
	kinds   *kinds
	cluster *cluster
}

func newQueryResourceFor(k *kinds) func() resource.Resource {
	return func() resource.Resource { return &queryResource{kinds: k} }
}

func (r *queryResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_streaming_query"
}

func (r *queryResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.cluster = clusterFrom(req.ProviderData, &resp.Diagnostics)
}

func (r *queryResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	s, err := r.schema(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Invalid Provider Schema", err.Error())
		return
	}
	resp.Schema = s
}

func (r *queryResource) schema(ctx context.Context) (schema.Schema, error) {
	if r.kinds.err != nil {
		return schema.Schema{}, r.kinds.err
	}
	attrs, err := resourceAttributes(r.kinds.query, "")
	if err != nil {
		return schema.Schema{}, err
	}
	meta := queryMetaAttributes(ctx)
	for name, a := range meta {
		if _, clash := attrs[name]; clash {
			return schema.Schema{}, fmt.Errorf("spec field %s clashes with the resource attribute of that name", name)
		}
		attrs[name] = a
	}
	return schema.Schema{
		MarkdownDescription: "A Lockstep `StreamingQuery`: named sources, ordered transform steps, one sink, a trigger " +
			"and a checkpoint, run by the Lockstep controller as micro-batches. The attributes mirror the " +
			"StreamingQuery spec (see the spec reference in docs/spec.md), in snake_case.\n\n" +
			"Every plan sends the planned query to the API server as a server-side dry run, so the admission " +
			"webhook judges the change against what the query's checkpoint recorded. A change the checkpoint " +
			"cannot survive fails the plan with the rule, the old and new values and the remedy; a change that " +
			"is allowed with a warning shows the warning. Changing `checkpoint.location` is a fresh start — the " +
			"query gets a new query id and reads its sources again from their starting positions — unless the new " +
			"location already holds this query's checkpoint, from which it resumes; the plan reads the checkpoint and says which.",
		Attributes: attrs,
	}, nil
}

// queryMetaAttributes are the resource's attributes beside the spec's: its identity, what the
// controller reports, the guarantee, and how apply waits.
func queryMetaAttributes(ctx context.Context) map[string]schema.Attribute {
	computed := func(desc string, stable bool) schema.StringAttribute {
		a := schema.StringAttribute{Computed: true, Description: desc, MarkdownDescription: desc}
		if stable {
			a.PlanModifiers = []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
		}
		return a
	}
	to := timeouts.Attributes(ctx, timeouts.Opts{Create: true, Update: true, Delete: true,
		CreateDescription: "How long `wait_for` may wait after the query is created (a Go duration). Default 10m.",
		UpdateDescription: "How long `wait_for` may wait after the query is changed (a Go duration). Default 10m.",
		DeleteDescription: "How long to wait for the query to be gone after deleting it (a Go duration). Default 5m.",
	}).(schema.SingleNestedAttribute)
	to.Description = "How long apply waits; see `wait_for`."
	to.MarkdownDescription = to.Description
	for name, a := range to.Attributes {
		if sa, ok := a.(schema.StringAttribute); ok {
			sa.MarkdownDescription = sa.Description
			to.Attributes[name] = sa
		}
	}
	return map[string]schema.Attribute{
		attrID: computed("The query's `namespace/name`, which `terraform import` takes.", true),
		attrNamespace: schema.StringAttribute{Optional: true, Computed: true,
			Description:         "Namespace of the query. Omitted: the provider's namespace. Changing it replaces the query.",
			MarkdownDescription: "Namespace of the query. Omitted: the provider's `namespace`. Changing it replaces the query.",
			PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown(), stringplanmodifier.RequiresReplace()},
			Validators:          dnsLabel()},
		attrName: schema.StringAttribute{Required: true,
			Description:         "Name of the query, a DNS label. Changing it replaces the query, which starts afresh unless checkpoint.location is kept.",
			MarkdownDescription: "Name of the query, a DNS label. Changing it replaces the query, which starts afresh unless `checkpoint.location` is kept.",
			PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
			Validators:          dnsLabel()},
		attrUID: computed("The Kubernetes UID of the StreamingQuery object.", true),
		attrQueryID: computed("The query id recorded in the checkpoint's metadata; sinks key their idempotence by it. "+
			"Unknown until the engine has written the checkpoint, and new after a fresh start.", false),
		attrPhase: computed("The query's phase as the controller reports it: Pending, Running, Rebuilding, Suspended, Failed, Blocked or Completed.", false),
		attrCheckpointLocation: computed("The checkpoint location in force: checkpoint.location, or the one the "+
			"admission webhook derived from the CheckpointStore. Known at plan time when the cluster can be asked.", false),
		attrLatestCommittedBatch: schema.Int64Attribute{Computed: true,
			Description:         "The newest batch in the checkpoint's commit log, as the controller last reported it.",
			MarkdownDescription: "The newest batch in the checkpoint's commit log, as the controller last reported it."},
		attrDeliveryGuarantee: computed("The query's delivery guarantee, computed from its sources and sink at plan time: "+
			"exactly-once, at-least-once or none.", false),
		attrDeliveryGuaranteeReason: computed("Why the query has its delivery guarantee, and what readers must do for at-least-once.", false),
		attrWaitFor: schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(waitNothing),
			Description: "What apply waits for after creating or changing the query, for this spec: nothing (default); " +
				"running (the controller reports phase Running or Completed: the engine started, no batch has necessarily " +
				"succeeded); committed_batch (a batch newer than before the apply is committed: for a new query, its first " +
				"committed batch, which proves that it reads, computes and writes); or caught_up (such a batch is committed " +
				"and the sources' lag is 0, or the query completed). Failed or Blocked ends the wait with an error.",
			MarkdownDescription: "What apply waits for after creating or changing the query, for this spec:\n" +
				"  - `nothing` (default);\n" +
				"  - `running`: the controller reports phase `Running` or `Completed` — the engine started; no batch has necessarily succeeded;\n" +
				"  - `committed_batch`: a batch newer than before the apply is committed — for a new query its first committed batch, " +
				"which proves that it reads, computes and writes;\n" +
				"  - `caught_up`: such a batch is committed and the sources' `lag` is 0 (nothing left to read), or the query completed.\n\n" +
				"  `Failed` or `Blocked` ends the wait with an error.",
			Validators: []validator.String{stringvalidator.OneOf(waitNothing, waitRunning, waitCommittedBatch, waitCaughtUp)}},
		attrTimeouts: to,
	}
}

func (r *queryResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.write(ctx, req.Plan, req.Config, true, &resp.State, resp.Private.SetKey, &resp.Diagnostics)
}

func (r *queryResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.write(ctx, req.Plan, req.Config, false, &resp.State, resp.Private.SetKey, &resp.Diagnostics)
}

// write is Create (create true) and Update: it reads the plan's meta attributes and the
// operation's timeout, applies the plan, and records with setPrivate whether the
// configuration set the checkpoint location (privateLocation).
func (r *queryResource) write(ctx context.Context, plan tfsdk.Plan, config tfsdk.Config, create bool, state *tfsdk.State,
	setPrivate func(context.Context, string, []byte) diag.Diagnostics, diags *diag.Diagnostics) {
	var m queryMeta
	diags.Append(m.get(ctx, plan)...)
	if diags.HasError() {
		return
	}
	timeoutOf := m.Timeouts.Update
	if create {
		timeoutOf = m.Timeouts.Create
	}
	timeout, d := timeoutOf(ctx, defaultWaitTimeout)
	diags.Append(d...)
	if diags.HasError() {
		return
	}
	r.apply(ctx, plan, m, timeout, create, state, diags)
	diags.Append(setPrivate(ctx, privateLocation, locationOrigin(ctx, config))...)
}

// privateLocation is the key of the resource's private state that records whether the
// configuration set checkpoint.location: the state cannot tell, since it holds the location
// the webhook derived too. A plan needs it to see that an explicit location was removed.
const privateLocation = "checkpoint_location"

// locationOrigin is the private state value of privateLocation for a configuration.
func locationOrigin(ctx context.Context, config tfsdk.Config) []byte {
	var loc types.String
	config.GetAttribute(ctx, path.Root("checkpoint").AtName("location"), &loc)
	if loc.IsNull() {
		return []byte(`{"configured":false}`)
	}
	return []byte(`{"configured":true}`)
}

// apply writes the planned query in one request (see writeQuery), waits as wait_for says, and
// records what the API server holds in state.
// On create, a query that already exists is an error: server-side apply would silently take
// over a query that Terraform does not manage.
func (r *queryResource) apply(ctx context.Context, plan tfsdk.Plan, m queryMeta, timeout time.Duration, create bool, state *tfsdk.State, diags *diag.Diagnostics) {
	if !configured(r.cluster, diags) {
		return
	}
	spec, _, err := specOf(r.kinds.query, plan.Raw)
	if err != nil {
		diags.AddError("Internal Error", "Read the planned spec: "+err.Error())
		return
	}
	namespace := cmp.Or(m.Namespace.ValueString(), r.cluster.namespace)
	name := m.Name.ValueString()

	var before *int64 // the newest committed batch before this apply, for wait_for = committed_batch
	cur, err := r.cluster.getQuery(ctx, namespace, name)
	switch {
	case err == nil && create:
		diags.AddError("Streaming Query Already Exists", alreadyExists(namespace, name))
		return
	case err == nil:
		if st, err := queryStatus(cur); err == nil {
			before = st.LatestCommittedBatch
		}
	case apierrors.IsNotFound(err):
		cur = nil
	default:
		diags.AddError("Cannot Read Streaming Query", fmt.Sprintf("Read StreamingQuery %s/%s: %v.", namespace, name, err))
		return
	}

	desired := queryObject(namespace, name, spec)
	if err := settingsOf(m).annotate(desired); err != nil {
		diags.AddError("Internal Error", "Record wait_for and timeouts: "+err.Error())
		return
	}
	wctx, warns := withWarnings(ctx)
	obj, err := r.cluster.writeQuery(wctx, r.kinds.query, plan.Raw, desired, cur)
	for _, w := range warns.list() {
		// The plan's dry run showed the webhook's findings and its note of a new location;
		// saying them again after apply would only repeat them.
		if _, msg, _ := strings.Cut(w, ": "); isFinding(msg) || warningField(w) == "spec.checkpoint.location" {
			continue
		}
		addWarning(diags, r.kinds.query, w)
	}
	if err != nil {
		addAPIError(diags, r.kinds.query, fmt.Sprintf("apply StreamingQuery %s/%s", namespace, name), err)
		return
	}
	if wf := m.WaitFor.ValueString(); wf != "" && wf != waitNothing {
		var werr error
		obj, werr = r.wait(ctx, obj, wf, before, timeout)
		if werr != nil {
			// The query was written: record it, so that the next plan starts from what is there.
			diags.AddError("Streaming Query Not Ready", werr.Error())
		}
	}

	state.Raw = plan.Raw.Copy()
	diags.Append(setSpec(ctx, state, r.kinds.query, objectSpec(obj), plan.Raw)...)
	diags.Append(r.setObserved(ctx, state, m, obj)...)
}

// setObserved records the identity and status of obj in the computed attributes. Values the
// plan already knew are kept, so that what apply reports matches what plan promised.
func (r *queryResource) setObserved(ctx context.Context, dst attributeSetter, planned queryMeta, obj *unstructured.Unstructured) diag.Diagnostics {
	var diags diag.Diagnostics
	st, err := queryStatus(obj)
	if err != nil {
		diags.AddWarning("Unexpected Status", err.Error())
	}
	m := planned
	m.ID = types.StringValue(obj.GetNamespace() + "/" + obj.GetName())
	m.Namespace = types.StringValue(obj.GetNamespace())
	m.Name = types.StringValue(obj.GetName())
	m.UID = types.StringValue(string(obj.GetUID()))
	loc, _, _ := unstructured.NestedString(obj.Object, "spec", "checkpoint", "location")
	if !known(planned.QueryID) {
		m.QueryID = types.StringNull()
		// The status's query id is the one of the checkpoint the controller last read: take it
		// only once the controller has seen this spec at this location, else it is the
		// previous checkpoint's (a location change applied without waiting).
		if st.ObservedGeneration >= obj.GetGeneration() && (loc == "" || st.CheckpointLocation == "" || st.CheckpointLocation == loc) {
			m.QueryID = stringOrNull(st.QueryID)
		}
	}
	m.Phase = stringOrNull(string(st.Phase))
	m.LatestCommittedBatch = types.Int64PointerValue(st.LatestCommittedBatch)
	m.CheckpointLocation = stringOrNull(cmp.Or(loc, st.CheckpointLocation))
	spec, err := typedSpec(objectSpec(obj))
	if err != nil {
		diags.AddWarning("Unexpected Spec", err.Error())
	} else {
		g, reason := compat.GuaranteeOf(spec)
		m.DeliveryGuarantee, m.DeliveryGuaranteeReason = types.StringValue(string(g)), types.StringValue(reason)
	}
	if m.WaitFor.IsNull() || m.WaitFor.IsUnknown() {
		m.WaitFor = types.StringValue(waitNothing)
	}
	if m.Timeouts.IsUnknown() {
		m.Timeouts.Object = types.ObjectNull(m.Timeouts.AttributeTypes(ctx))
	}
	diags.Append(m.set(ctx, dst)...)
	return diags
}

// alreadyWritten explains a query that this provider wrote but that no resource of this
// state holds (it was not refreshed in this plan).
func alreadyWritten(namespace, name string) string {
	return fmt.Sprintf("StreamingQuery %s/%s already exists and was written by Terraform (field manager %s), but no "+
		"resource that this plan refreshed holds it. If it is this configuration's tainted or replaced query and "+
		"the plan ran with -refresh=false, plan again with refresh. Otherwise another configuration manages it: "+
		"import it (terraform import <address> %s/%s) to manage it here, or choose another name.",
		namespace, name, FieldManager, namespace, name)
}

func alreadyExists(namespace, name string) string {
	return fmt.Sprintf("StreamingQuery %s/%s already exists and Terraform does not manage it. Import it "+
		"(terraform import <address> %s/%s) to manage it here, or choose another name.", namespace, name, namespace, name)
}

func known(s types.String) bool { return !s.IsNull() && !s.IsUnknown() }

func stringOrNull(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}

func (r *queryResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	if r.cluster == nil {
		return // connection settings unknown: keep the state as it is
	}
	var m queryMeta
	resp.Diagnostics.Append(m.get(ctx, req.State)...)
	if resp.Diagnostics.HasError() {
		return
	}
	namespace := cmp.Or(m.Namespace.ValueString(), r.cluster.namespace)
	obj, err := r.cluster.getQuery(ctx, namespace, m.Name.ValueString())
	if apierrors.IsNotFound(err) {
		resp.State.RemoveResource(ctx) // deleted outside Terraform: the next plan creates it again
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot Read Streaming Query", fmt.Sprintf("Read StreamingQuery %s/%s: %v.", namespace, m.Name.ValueString(), err))
		return
	}
	r.cluster.noteManaged(obj.GetUID())
	resp.Diagnostics.Append(restoreSettings(ctx, &m, obj)...) // after an import, the state holds neither
	want := req.State.Raw
	if m.UID.IsNull() {
		// The first read after terraform import: the state holds only the query's identity,
		// nothing to compare the object with, so all of the object goes into it.
		want = tftypes.NewValue(want.Type(), nil)
	}
	resp.Diagnostics.Append(setSpec(ctx, &resp.State, r.kinds.query, objectSpec(obj), want)...)
	m.QueryID = types.StringUnknown() // a refresh takes the query id from status
	resp.Diagnostics.Append(r.setObserved(ctx, &resp.State, m, obj)...)
}

func (r *queryResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	if !configured(r.cluster, &resp.Diagnostics) {
		return
	}
	var m queryMeta
	resp.Diagnostics.Append(m.get(ctx, req.State)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := m.Timeouts.Delete(ctx, defaultDeleteTimeout)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	namespace, name := cmp.Or(m.Namespace.ValueString(), r.cluster.namespace), m.Name.ValueString()
	err := r.cluster.deleteQuery(ctx, namespace, name, k8stypes.UID(m.UID.ValueString()))
	switch {
	case apierrors.IsNotFound(err):
		return // already gone
	case apierrors.IsConflict(err):
		return // the UID precondition failed: the object there now is another one, not ours to delete
	case err != nil:
		resp.Diagnostics.AddError("Cannot Delete Streaming Query", fmt.Sprintf("Delete StreamingQuery %s/%s: %v.", namespace, name, err))
		return
	}
	if err := r.waitGone(ctx, namespace, name, timeout); err != nil {
		resp.Diagnostics.AddError("Streaming Query Not Deleted", err.Error())
	}
}

func (r *queryResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	namespace, name, ok := strings.Cut(req.ID, "/")
	if !ok {
		namespace, name = "", req.ID
	}
	if r.cluster != nil && namespace == "" {
		namespace = r.cluster.namespace
	}
	if name == "" || namespace == "" || strings.Contains(name, "/") {
		resp.Diagnostics.AddError("Invalid Import ID", fmt.Sprintf("Import takes namespace/name (or a name in the provider's namespace); got %q.", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root(attrID), namespace+"/"+name)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root(attrNamespace), namespace)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root(attrName), name)...)
}

// dnsLabel validates a Kubernetes name that must be a DNS label.
func dnsLabel() []validator.String {
	return []validator.String{
		stringvalidator.LengthBetween(1, 63),
		stringvalidator.RegexMatches(dnsLabelPattern, "must be a DNS label: lower-case letters, digits and '-', starting and ending with a letter or digit"),
	}
}

var dnsLabelPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
