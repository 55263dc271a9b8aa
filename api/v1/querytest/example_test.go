package querytest_test

import (
	"fmt"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/plan"
)

func ExampleMake() {
	q := qt.Make("orders-clean", "shop").
		FilesSource("orders", "/data/orders", "json", qt.Col("id", v1.TypeString), qt.Col("amount", v1.TypeDouble)).
		Filter("amount > 0").
		Select(qt.As("id", "id"), qt.As("cents", "int(amount * 100.0)")).
		FilesSink("/data/clean", "json").
		AvailableNow().
		Obj()
	cols, err := plan.OutputColumns(&q.Spec)
	fmt.Println(plan.Validate(q), cols, err)
	// Output: [] [{id string} {cents long}] <nil>
}
