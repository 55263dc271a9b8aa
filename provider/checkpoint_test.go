package provider

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// These tests run against the real admission webhook and reconciler (controller package) on
// a control plane whose API server calls them, with checkpoints on a real S3 server: the plan
// asks the webhook, which reads what the query's checkpoint recorded.

// TestAccStreamingQuery_compatibleChange plans a change the checkpoint allows as an in-place
// update that keeps the query id, and applies it.
func TestAccStreamingQuery_compatibleChange(t *testing.T) {
	c := newLockstepCluster(t)
	q := c.query()
	changed := q
	changed.Filter = "amount > 1.0"
	changed.ProcessingTime = "1m"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		CheckDestroy:             c.checkGone("orders"),
		Steps: []resource.TestStep{
			{
				Config: c.provider() + q.hcl(),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					// The webhook derives the location from the store; the dry run tells the plan.
					plancheck.ExpectKnownValue(address, tfjsonpath.New("checkpoint_location"), knownvalue.StringExact(c.location("orders"))),
					plancheck.ExpectKnownValue(address, tfjsonpath.New("checkpoint").AtMapKey("location"), knownvalue.StringExact(c.location("orders"))),
				}},
			},
			{
				PreConfig: func() { c.writeCheckpoint(t, "orders") },
				Config:    c.provider() + q.hcl(),
				// The controller reads the query id from the checkpoint's metadata.
				Check: c.checkQueryIDEventually("orders"),
			},
			{
				Config: c.provider() + changed.hcl(),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(address, tfjsonpath.New("query_id"), knownvalue.NotNull()),
					plancheck.ExpectKnownValue(address, tfjsonpath.New("checkpoint_location"), knownvalue.StringExact(c.location("orders"))),
				}},
				Check: c.checkSpec("orders", func(spec map[string]any) error {
					return expectNested(spec, "amount > 1.0", "transform", 0, "filter")
				}),
			},
		},
	})
}

// TestAccStreamingQuery_incompatibleChange fails the plan of a change the checkpoint cannot
// survive, on the attribute that changed, with the rule and both ways forward; the same
// change with a new checkpoint location is then planned as a fresh start and applied.
func TestAccStreamingQuery_incompatibleChange(t *testing.T) {
	c := newLockstepCluster(t)
	q := c.query()
	moved := q
	moved.Source = c.path("landing/orders-v2")
	fresh := moved
	fresh.Location = c.location("orders-v2")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			{Config: c.provider() + q.hcl()},
			{
				PreConfig: func() { c.writeCheckpoint(t, "orders") },
				Config:    c.provider() + moved.hcl(),
				PlanOnly:  true,
				ExpectError: regexp.MustCompile(`Error:\s+Checkpoint\s+Refuses\s+The\s+Change[\s\S]*` +
					`\d+:\s+sources\s+=[\s\S]*` + // Terraform points at the attribute
					`Attribute:\s+sources\[0\]\.files\.path[\s\S]*` +
					`Rule:\s+files-path[\s\S]*` +
					`landing/orders"\s+→\s+"s3://[^"]+/landing/orders-v2"[\s\S]*` +
					`What\s+to\s+do:[\s\S]*(revert|Revert)[\s\S]*checkpoint`),
			},
			{
				Config: c.provider() + fresh.hcl(),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					// A fresh start, in place: never a silent replacement.
					plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate),
					plancheck.ExpectUnknownValue(address, tfjsonpath.New("query_id")),
					plancheck.ExpectKnownValue(address, tfjsonpath.New("checkpoint_location"), knownvalue.StringExact(c.location("orders-v2"))),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(address, tfjsonpath.New("checkpoint_location"), knownvalue.StringExact(c.location("orders-v2"))),
				},
				Check: c.checkSpec("orders", func(spec map[string]any) error {
					return expectNested(spec, c.location("orders-v2"), "checkpoint", "location")
				}),
			},
		},
	})
}

// TestAccStreamingQuery_warningChange applies a change the checkpoint allows with a warning
// (files sink → console sink); the plan's warning text is checked by TestPlanOutput.
func TestAccStreamingQuery_warningChange(t *testing.T) {
	c := newLockstepCluster(t)
	q := c.query()
	console := q
	console.Sink = ""
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			{Config: c.provider() + q.hcl()},
			{
				PreConfig: func() { c.writeCheckpoint(t, "orders") },
				Config:    c.provider() + console.hcl(),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(address, tfjsonpath.New("delivery_guarantee"), knownvalue.StringExact("none")),
				}},
			},
		},
	})
}

// TestAccStreamingQuery_queryIDAfterMove changes the checkpoint location without waiting
// (wait_for = "nothing"): state must not keep the old checkpoint's query id, which the
// controller still reports until it has seen the new location.
func TestAccStreamingQuery_queryIDAfterMove(t *testing.T) {
	c := newLockstepCluster(t)
	q := c.query()
	moved := q
	moved.Location = c.location("orders-moved")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			{Config: c.provider() + q.hcl()},
			{
				PreConfig: func() { c.writeCheckpoint(t, "orders") },
				Config:    c.provider() + q.hcl(),
				Check:     c.checkQueryIDEventually("orders"),
			},
			{
				Config: c.provider() + q.hcl(),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(address, tfjsonpath.New("query_id"), knownvalue.NotNull()),
				},
			},
			{
				Config: c.provider() + moved.hcl(),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectUnknownValue(address, tfjsonpath.New("query_id")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					// No checkpoint at the new location yet: no query id, not the old one.
					statecheck.ExpectKnownValue(address, tfjsonpath.New("query_id"), knownvalue.Null()),
				},
			},
		},
	})
}
