package v1_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
)

func TestSourceColumns(t *testing.T) {
	cases := []struct {
		name   string
		source v1.Source
		want   v1.Columns
		ok     bool
	}{
		{"rate", v1.Source{Rate: &v1.RateSource{}}, v1.RateColumns(), true},
		{"kafka json", v1.Source{Kafka: &v1.KafkaSource{}, Schema: &v1.Schema{Columns: v1.Columns{qt.Col("a", v1.TypeLong)}}},
			append(v1.Columns{qt.Col("a", v1.TypeLong)}, v1.KafkaMetadataColumns()...), true},
		{"kafka raw", v1.Source{Kafka: &v1.KafkaSource{Format: v1.KafkaRaw}},
			append(v1.Columns{qt.Col("value", v1.TypeString)}, v1.KafkaMetadataColumns()...), true},
		{"delta", v1.Source{Delta: &v1.DeltaSource{}, Schema: &v1.Schema{Columns: v1.Columns{qt.Col("a", v1.TypeLong)}}}, v1.Columns{qt.Col("a", v1.TypeLong)}, true},
		{"files without schema", v1.Source{Files: &v1.FilesSource{}}, nil, false},
		{"no kind", v1.Source{Schema: &v1.Schema{Columns: v1.Columns{qt.Col("a", v1.TypeLong)}}}, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.source.Columns()
			if ok != tc.ok || !cmp.Equal(got, tc.want) {
				t.Errorf("Columns() = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
