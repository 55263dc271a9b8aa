package kafka

import (
	"math"
	"testing"
)

func TestLimitSplitsInProportionToBacklog(t *testing.T) {
	tests := []struct {
		name  string
		sizes []int64
		max   int64
		want  []int64
	}{
		{"under the cap", []int64{3, 4}, 10, []int64{3, 4}},
		{"proportional", []int64{100, 300}, 40, []int64{10, 30}},
		{"remainder to the largest fraction", []int64{1, 1, 1}, 2, []int64{1, 1, 0}},
		{"skewed", []int64{1000, 1, 0}, 10, []int64{10, 0, 0}},
		{"rounding keeps the total", []int64{5, 5, 5}, 7, []int64{3, 2, 2}},
		{"huge numbers", []int64{math.MaxInt64 / 4, math.MaxInt64 / 4}, math.MaxInt64 / 8, []int64{math.MaxInt64/16 + 1, math.MaxInt64 / 16}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spans := make([]span, len(tt.sizes))
			for i, n := range tt.sizes {
				spans[i] = span{tp: topicPartition{"t", int32(i)}, from: 7, to: 7 + n}
			}
			limit(spans, tt.max)
			var total int64
			for i, s := range spans {
				got := s.to - s.from
				total += got
				if got != tt.want[i] {
					t.Errorf("span %d: %d records, want %d (all: %v)", i, got, tt.want[i], spans)
				}
			}
			var sum int64
			for _, n := range tt.sizes {
				sum += n
			}
			if want := min(sum, tt.max); total != want {
				t.Errorf("total %d, want %d", total, want)
			}
		})
	}
}

func TestOffsetsJSONIsSparks(t *testing.T) {
	o, err := parseOffsets([]byte(`{"orders":{"0":12,"1":3}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := o.get(topicPartition{"orders", 1}); got != 3 {
		t.Errorf("orders/1 = %d, want 3", got)
	}
	if got := string(o.json()); got != `{"orders":{"0":12,"1":3}}` {
		t.Errorf("json = %s", got)
	}
	if _, err := parseOffsets([]byte(`{"orders":{"x":1}}`)); err == nil {
		t.Error("a partition that is not a number parsed")
	}
}
