package provider

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// TestPlanUnknownNamespace plans a query whose namespace is known only after apply (made by
// another resource of the same apply): the plan keeps it unknown, says that the change could
// not be checked, and apply creates the query in that namespace.
func TestPlanUnknownNamespace(t *testing.T) {
	c := newLockstepCluster(t)
	q := c.query()
	q.Extra = "  namespace = terraform_data.team.output"
	team := fmt.Sprintf("resource \"terraform_data\" \"team\" {\n  input = %q\n}\n", c.namespace)

	w := newWorkspace(t, c)
	w.write(team + q.hcl())
	golden(t, "plan-unknown-namespace.golden", w.mustPlan())

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{{
			Config: c.provider() + team + q.hcl(),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(address, plancheck.ResourceActionCreate),
				plancheck.ExpectUnknownValue(address, tfjsonpath.New("namespace")),
				plancheck.ExpectUnknownValue(address, tfjsonpath.New("id")),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(address, tfjsonpath.New("namespace"), knownvalue.StringExact(c.namespace)),
				statecheck.ExpectKnownValue(address, tfjsonpath.New("checkpoint_location"), knownvalue.StringExact(c.location("orders"))),
			},
		}},
	})
}
