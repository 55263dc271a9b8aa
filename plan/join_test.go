package plan_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/plan"
)

// customers is the static side of an enrichment of orders.
func customers() *v1.StaticSide {
	return qt.StaticDelta("/lake/customers",
		qt.Col("id", v1.TypeString), qt.Col("name", v1.TypeString), qt.Col("country", v1.TypeString))
}

// enrich is orders with a customer_id, enriched with the customers table.
func enrich() *qt.Query {
	return qt.Make("q", "ns").
		FilesSource("orders", "/data/orders", "json",
			qt.Col("order_id", v1.TypeString), qt.Col("customer_id", v1.TypeString),
			qt.Col("amount", v1.TypeDouble), qt.Col("ts", v1.TypeTimestamp))
}

// impressions joins ad impressions with clicks within an hour.
func impressions() *qt.Query {
	return qt.Make("q", "ns").
		KafkaSource("impressions", "k:9092", "impressions", qt.Col("ad_id", v1.TypeString), qt.Col("imp_time", v1.TypeTimestamp)).
		KafkaSource("clicks", "k:9092", "clicks", qt.Col("click_ad_id", v1.TypeString), qt.Col("click_time", v1.TypeTimestamp)).
		SelectColumns("ad_id", "imp_time").
		Watermark("imp_time", "10m")
}

func streamJoin() v1.Join {
	return v1.Join{
		Name: "imp-clicks", Type: v1.JoinLeftOuter, Keys: qt.Keys("ad_id", "click_ad_id"),
		Stream: qt.StreamSide("clicks", "imp_time", "click_time", "20m", "0s", "1h"),
		Select: []v1.JoinColumn{{Side: v1.SideLeft, Column: "ad_id"}, {Side: v1.SideLeft, Column: "imp_time"}, {Side: v1.SideRight, Column: "click_time"}},
	}
}

func TestValidateJoin(t *testing.T) {
	join := transform.Index(0).Child("join")
	cases := []validateCase{
		{
			name:  "a stream–static enrichment with a right prefix is valid",
			query: enrich().Join(v1.Join{Type: v1.JoinLeftOuter, Keys: qt.Keys("customer_id", "id"), Static: customers(), RightPrefix: "c_"}).FilesSink("/out", "json"),
		},
		{
			name: "a static files side refreshed every 10m, with select, is valid",
			query: enrich().Join(v1.Join{
				Name: "customers", Keys: qt.Keys("customer_id", "id"),
				Static: func() *v1.StaticSide {
					s := qt.StaticFiles("s3://ref/customers", v1.FormatCSV, qt.Col("id", v1.TypeString), qt.Col("name", v1.TypeString))
					s.Refresh = &v1.Refresh{Every: "10m"}
					return s
				}(),
				Select: []v1.JoinColumn{{Side: v1.SideLeft, Column: "order_id"}, {Side: v1.SideRight, Column: "name", Name: "customer"}},
			}).FilesSink("/out", "json"),
		},
		{
			name:  "a stream–stream left outer join is valid, and its right source is not unioned",
			query: impressions().Join(streamJoin()).FilesSink("/out", "json"),
		},
		{
			name: "a stream–stream full outer join is valid; a static one is inner or left outer only",
			query: impressions().Join(func() v1.Join { j := streamJoin(); j.Type = v1.JoinFullOuter; return j }()).
				Join(v1.Join{Type: v1.JoinLeftSemi, Keys: qt.Keys("ad_id", "id"), Static: qt.StaticDelta("/lake/ads", qt.Col("id", v1.TypeString))}).
				FilesSink("/out", "json"),
			want: field.ErrorList{field.NotSupported(transform.Index(3).Child("join", "type"), v1.JoinLeftSemi, v1.StaticJoinTypes())},
		},
		{
			name: "a left semi join yields the left columns only",
			query: impressions().Join(func() v1.Join { j := streamJoin(); j.Type = v1.JoinLeftSemi; return j }()).
				Filter("imp_time > timestamp('2026-01-01T00:00:00Z')").FilesSink("/out", "json"),
			want: field.ErrorList{field.Invalid(transform.Index(2).Child("join", "select").Index(2).Child("side"), v1.SideRight, "")},
		},
		{
			name: "a stream side's transform is valid, and the join sees its columns",
			query: impressions().Join(func() v1.Join {
				j := streamJoin()
				j.Stream.Transform = []v1.SideStep{
					{Filter: "click_ad_id != ''"},
					{Select: []v1.Projection{qt.As("click_ad_id", "click_ad_id.upperAscii()"), qt.As("click_time", "click_time"), qt.As("p", "_partition")}},
				}
				j.Select = append(j.Select, v1.JoinColumn{Side: v1.SideRight, Column: "p"})
				return j
			}()).FilesSink("/out", "json"),
		},
		{
			name: "a stream side's transform: bad steps, and the watermark column selected away",
			query: impressions().Join(func() v1.Join {
				j := streamJoin()
				j.Stream.Transform = []v1.SideStep{
					{Filter: "cost > 1.0"},
					{},
					{Select: []v1.Projection{qt.As("click_ad_id", "click_ad_id")}},
				}
				return j
			}()).FilesSink("/out", "json"),
			want: field.ErrorList{
				field.Required(transform.Index(2).Child("join", "stream", "transform").Index(1), ""),
				field.Invalid(transform.Index(2).Child("join", "stream", "transform").Index(0).Child("filter"), "cost > 1.0", ""),
				field.Invalid(transform.Index(2).Child("join", "stream", "watermark", "column"), "click_time", ""),
				field.Invalid(transform.Index(2).Child("join", "select").Index(2).Child("column"), "click_time", ""),
			},
		},
		{
			name: "a static PostgreSQL table refreshed every 5m is valid",
			query: enrich().Join(v1.Join{Keys: qt.Keys("customer_id", "id"), RightPrefix: "c_", Static: &v1.StaticSide{
				Postgres: &v1.StaticPostgres{Connection: v1.PostgresConnection{DSNEnv: "CRM_DSN"}, Table: "crm.customers"},
				Schema:   &v1.Schema{Columns: v1.Columns{{Name: "id", Type: v1.TypeString}}},
				Refresh:  &v1.Refresh{Every: "5m"},
			}}).FilesSink("/out", "json"),
		},
		{
			name: "a static PostgreSQL table: no Secret yet, a table name, no versions",
			query: enrich().Join(v1.Join{Keys: qt.Keys("customer_id", "id"), RightPrefix: "c_", Static: &v1.StaticSide{
				Postgres: &v1.StaticPostgres{Connection: v1.PostgresConnection{SecretName: "crm"}, Table: "CRM Customers"},
				Schema:   &v1.Schema{Columns: v1.Columns{{Name: "id", Type: v1.TypeString}}},
				Refresh:  &v1.Refresh{OnNewVersion: true},
			}}).FilesSink("/out", "json"),
			want: field.ErrorList{
				field.Forbidden(transform.Index(0).Child("join", "static", "postgres", "connection", "secretName"), ""),
				field.Invalid(transform.Index(0).Child("join", "static", "postgres", "table"), "CRM Customers", ""),
				field.Invalid(transform.Index(0).Child("join", "static", "refresh", "onNewVersion"), true, ""),
			},
		},
		{
			name: "a left semi join has no right prefix",
			query: impressions().Join(func() v1.Join {
				j := streamJoin()
				j.Type, j.Select, j.RightPrefix = v1.JoinLeftSemi, nil, "c_"
				return j
			}()).FilesSink("/out", "json"),
			want: field.ErrorList{field.Invalid(transform.Index(2).Child("join", "rightPrefix"), "c_", "")},
		},
		{
			name:  "both sides yield a column: refused at the prefix",
			query: enrich().Select(qt.As("order_id", "order_id"), qt.As("id", "customer_id")).Join(v1.Join{Keys: qt.Keys("id", "id"), Static: customers()}).FilesSink("/out", "json"),
			want:  field.ErrorList{field.Invalid(transform.Index(1).Child("join", "rightPrefix"), "", "")},
		},
		{
			name: "select names clash and unknown columns",
			query: enrich().Join(v1.Join{Keys: qt.Keys("customer_id", "id"), Static: customers(), Select: []v1.JoinColumn{
				{Side: v1.SideLeft, Column: "order_id", Name: "id"}, {Side: v1.SideRight, Column: "id"}, {Side: v1.SideRight, Column: "nope"}, {Column: "amount"},
			}}).FilesSink("/out", "json"),
			want: field.ErrorList{
				field.Duplicate(join.Child("select").Index(1).Child("column"), "id"),
				field.Required(join.Child("select").Index(3).Child("side"), ""),
				field.Invalid(join.Child("select").Index(2).Child("column"), "nope", ""),
			},
		},
		{
			name:  "keys must exist on their side and have the same type",
			query: enrich().Join(v1.Join{Keys: qt.Keys("amount", "id", "customer_id", "missing"), Static: customers(), RightPrefix: "c_"}).FilesSink("/out", "json"),
			want: field.ErrorList{
				field.Invalid(join.Child("keys").Index(0).Child("right"), "id", ""),
				field.Invalid(join.Child("keys").Index(1).Child("right"), "missing", ""),
			},
		},
		{
			name: "a static join is inner or leftOuter; onNewVersion needs delta; no keys",
			query: enrich().Join(v1.Join{Type: v1.JoinRightOuter, Static: func() *v1.StaticSide {
				s := qt.StaticFiles("/ref/c", v1.FormatJSON, qt.Col("id", v1.TypeString))
				s.Refresh = &v1.Refresh{OnNewVersion: true}
				return s
			}()}).FilesSink("/out", "json"),
			want: field.ErrorList{
				field.Invalid(join.Child("static", "refresh", "onNewVersion"), true, ""),
				field.NotSupported(join.Child("type"), v1.JoinRightOuter, v1.StaticJoinTypes()),
				field.Required(join.Child("keys"), ""),
			},
		},
		{
			name: "a static side needs exactly one of delta, files, and a schema",
			query: enrich().Join(v1.Join{Keys: qt.Keys("customer_id", "id"), Static: &v1.StaticSide{
				Refresh: &v1.Refresh{Every: "0s"},
			}}).FilesSink("/out", "json"),
			want: field.ErrorList{
				field.Required(join.Child("static"), ""),
				field.Required(join.Child("static", "schema"), ""),
				field.Invalid(join.Child("static", "refresh", "every"), "0s", ""),
			},
		},
		{
			name: "a stream join needs a left watermark, a known source, bounds on the watermark columns, append mode",
			query: qt.Make("q", "ns").
				KafkaSource("impressions", "k:9092", "impressions", qt.Col("ad_id", v1.TypeString), qt.Col("imp_time", v1.TypeTimestamp)).
				Join(v1.Join{Keys: qt.Keys("ad_id", "ad_id"), Stream: &v1.StreamSide{
					Source:    "clickz",
					Watermark: v1.Watermark{Column: "click_time"},
					TimeBound: v1.TimeBound{LeftColumn: "imp_time", RightColumn: "imp_time", LowerBound: "-1h"},
				}}).FilesSink("/out", "json").OutputMode(v1.OutputUpdate).Edit(func(s *v1.StreamingQuerySpec) {
				s.Sink.Files.Format = v1.FormatJSON
			}),
			want: field.ErrorList{
				field.Invalid(join.Child("stream", "source"), "clickz", ""),
				field.Required(join.Child("stream", "watermark", "delay"), ""),
				field.Invalid(join.Child("stream", "timeBound", "rightColumn"), "imp_time", ""),
				field.Invalid(join.Child("stream", "timeBound", "lowerBound"), "-1h", ""),
				field.Required(join.Child("stream", "timeBound", "upperBound"), ""),
				field.Invalid(mode, v1.OutputUpdate, ""),
				field.Required(join.Child("stream"), ""),
			},
		},
		{
			name:  "every source read by a stream join: nothing is left to union",
			query: qt.Make("q", "ns").KafkaSource("clicks", "k:9092", "clicks", qt.Col("ad_id", v1.TypeString), qt.Col("t", v1.TypeTimestamp)).Join(v1.Join{Keys: qt.Keys("ad_id", "ad_id"), Stream: qt.StreamSide("clicks", "t", "t", "0s", "0s", "0s")}).FilesSink("/out", "json"),
			want: field.ErrorList{
				field.Invalid(sources, 1, ""),
				field.Required(join.Child("stream"), ""),
			},
		},
		{
			name: "join names are unique among joins and stateful steps",
			query: enrich().DropDuplicates("dedup", "order_id").
				Join(v1.Join{Name: "dedup", Keys: qt.Keys("customer_id", "id"), Static: customers(), RightPrefix: "a_"}).
				Join(v1.Join{Name: "c", Keys: qt.Keys("customer_id", "id"), Static: customers(), RightPrefix: "b_"}).
				Join(v1.Join{Name: "c", Keys: qt.Keys("customer_id", "id"), Static: customers(), RightPrefix: "d_"}).FilesSink("/out", "json"),
			want: field.ErrorList{
				field.Invalid(transform.Index(1).Child("join", "name"), "dedup", ""),
				field.Duplicate(transform.Index(2).Child("join", "name"), "c"),
				field.Duplicate(transform.Index(3).Child("join", "name"), "c"),
			},
		},
		{
			name: "no join after an aggregate; stateful steps may follow a stream join",
			query: impressions().Join(streamJoin()).DropDuplicates("", "ad_id").
				Aggregate("", []v1.GroupKey{qt.Window("imp_time", "1h")}, v1.Aggregation{Name: "n", Function: v1.AggCount}).
				Join(v1.Join{Keys: qt.Keys("window_start", "id"), Static: customers()}).FilesSink("/out", "json"),
			want: field.ErrorList{
				field.Forbidden(transform.Index(5).Child("join"), ""),
				field.Invalid(transform.Index(5).Child("join", "keys").Index(0).Child("right"), "id", ""),
			},
		},
	}
	checkValidateSpec(t, cases)
}

func TestJoinColumns(t *testing.T) {
	q := enrich().Watermark("ts", "5m").
		Join(v1.Join{Type: v1.JoinLeftOuter, Keys: qt.Keys("customer_id", "id"), Static: customers(), LeftPrefix: "o_", RightPrefix: "c_"}).
		FilesSink("/out", "json")
	out, err := plan.OutputColumns(q.Spec())
	if err != nil {
		t.Fatal(err)
	}
	want := v1.Columns{
		qt.Col("o_order_id", v1.TypeString), qt.Col("o_customer_id", v1.TypeString), qt.Col("o_amount", v1.TypeDouble), qt.Col("o_ts", v1.TypeTimestamp),
		qt.Col("c_id", v1.TypeString), qt.Col("c_name", v1.TypeString), qt.Col("c_country", v1.TypeString),
	}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("OutputColumns() mismatch (-want +got):\n%s", diff)
	}

	// The stream join's right source is left out of the union; its select picks the columns.
	s := impressions().Join(streamJoin()).FilesSink("/out", "json").Spec()
	out, err = plan.OutputColumns(s)
	if err != nil {
		t.Fatal(err)
	}
	want = v1.Columns{qt.Col("ad_id", v1.TypeString), qt.Col("imp_time", v1.TypeTimestamp), qt.Col("click_time", v1.TypeTimestamp)}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("OutputColumns() of the stream join mismatch (-want +got):\n%s", diff)
	}
	if got := s.JoinedSources(); len(got) != 1 || !got["clicks"] {
		t.Errorf("JoinedSources() = %v, want only clicks", got)
	}
	if names, steps := s.JoinNames(); !cmp.Equal(names, []string{"imp-clicks"}) || !cmp.Equal(steps, []int{2}) {
		t.Errorf("JoinNames() = %v, %v", names, steps)
	}
	unnamed := enrich().Join(v1.Join{Keys: qt.Keys("customer_id", "id"), Static: customers(), RightPrefix: "c_"}).Spec()
	if names, _ := unnamed.JoinNames(); !cmp.Equal(names, []string{"join-0"}) {
		t.Errorf("JoinNames() of an unnamed join = %v, want join-0", names)
	}
}

func TestJoinDetails(t *testing.T) {
	got := plan.ValidateSpec(enrich().Select(qt.As("order_id", "order_id"), qt.As("id", "customer_id")).
		Join(v1.Join{Keys: qt.Keys("id", "id"), Static: customers()}).FilesSink("/out", "json").Spec())
	msg := got.ToAggregate().Error()
	for _, want := range []string{"spec.transform[1].join.rightPrefix", "both sides would yield a column id", "customers_"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Validate() = %q, want it to contain %q", msg, want)
		}
	}
}
