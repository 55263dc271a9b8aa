package controller

import (
	"testing"
	"time"
)

func TestTrendFold(t *testing.T) {
	lag := func(n int64) *int64 { return &n }
	const interval = time.Second
	type step struct {
		c    commitSeen
		want []string // reasons of the Events the commit starts
	}
	for _, tt := range []struct {
		name  string
		steps []step
	}{
		{"lag grows for LagGrowthBatches batches", []step{
			{commitSeen{batch: 0, lag: lag(10)}, nil},
			{commitSeen{batch: 1, lag: lag(20)}, nil},
			{commitSeen{batch: 2, lag: lag(30)}, nil},
			{commitSeen{batch: 3, lag: lag(40)}, nil},
			{commitSeen{batch: 4, lag: lag(50)}, nil},
			{commitSeen{batch: 5, lag: lag(60)}, []string{EventLagGrowing}},
			{commitSeen{batch: 6, lag: lag(70)}, nil}, // one Event per streak
			{commitSeen{batch: 7, lag: lag(70)}, nil}, // the streak ends
			{commitSeen{batch: 8, lag: lag(80)}, nil},
		}},
		{"skipped batches count as grown", []step{
			{commitSeen{batch: 10, lag: lag(10)}, nil},
			{commitSeen{batch: 13, lag: lag(20)}, nil},
			{commitSeen{batch: 15, lag: lag(30)}, []string{EventLagGrowing}},
		}},
		{"a shrinking lag resets the streak", []step{
			{commitSeen{batch: 0, lag: lag(10)}, nil},
			{commitSeen{batch: 4, lag: lag(20)}, nil},
			{commitSeen{batch: 5, lag: lag(5)}, nil},
			{commitSeen{batch: 6, lag: lag(6)}, nil},
		}},
		{"unknown lag never grows", []step{
			{commitSeen{batch: 0}, nil},
			{commitSeen{batch: 9}, nil},
		}},
		{"slow batches in a row", []step{
			{commitSeen{batch: 0, duration: 2 * interval}, nil},
			{commitSeen{batch: 1, duration: 2 * interval}, nil},
			{commitSeen{batch: 2, duration: 2 * interval}, []string{EventBatchesSlow}},
			{commitSeen{batch: 3, duration: 2 * interval}, nil},
			{commitSeen{batch: 4, duration: interval}, nil}, // on time: the streak ends
			{commitSeen{batch: 5, duration: 2 * interval}, nil},
			{commitSeen{batch: 6, duration: 2 * interval}, nil},
			{commitSeen{batch: 7, duration: 2 * interval}, []string{EventBatchesSlow}},
		}},
		{"a checkpoint started afresh resets", []step{
			{commitSeen{batch: 7, lag: lag(10), duration: 2 * interval}, nil},
			{commitSeen{batch: 8, lag: lag(20), duration: 2 * interval}, nil},
			{commitSeen{batch: 0, lag: lag(30), duration: 2 * interval}, nil},
			{commitSeen{batch: 1, lag: lag(40), duration: 2 * interval}, nil},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := trend{batch: -1}
			for _, s := range tt.steps {
				var got []string
				for _, e := range tr.fold(s.c, interval) {
					got = append(got, e.reason)
				}
				if len(got) != len(s.want) || len(got) > 0 && got[0] != s.want[0] {
					t.Errorf("fold(batch %d) = %v, want %v", s.c.batch, got, s.want)
				}
			}
		})
	}
	t.Run("no interval, no slow batches", func(t *testing.T) {
		tr := trend{batch: -1}
		for b := range int64(5) {
			if e := tr.fold(commitSeen{batch: b, duration: time.Hour}, 0); len(e) != 0 {
				t.Errorf("fold(batch %d) = %v with no trigger interval", b, e)
			}
		}
	})
}
