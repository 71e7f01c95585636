package main

import (
	"slices"
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	for q, want := range map[float64]time.Duration{0.5: 50 * time.Millisecond, 0.95: 95 * time.Millisecond,
		0.99: 99 * time.Millisecond, 1: 100 * time.Millisecond, 0: time.Millisecond} {
		if got := quantile(lat, q); got != want {
			t.Errorf("quantile(1..100 ms, %v) = %v, want %v", q, got, want)
		}
	}
	if got := quantile(nil, 0.99); got != 0 {
		t.Errorf("quantile of nothing = %v", got)
	}
	if got := quantile(lat[:1], 0.99); got != time.Millisecond {
		t.Errorf("quantile of one = %v", got)
	}
}

func TestOpenLoopPlan(t *testing.T) {
	p := openLoopPlan{Fractions: []float64{0.75, 0.25}, Steady: 0.5}
	if got := p.fractions(); !slices.Equal(got, []float64{0.25, 0.5, 0.75}) {
		t.Errorf("fractions %v, want the steady one added, sorted", got)
	}
	p.Fractions = []float64{0.5, 0.25, 0.5}
	if got := p.fractions(); !slices.Equal(got, []float64{0.25, 0.5}) {
		t.Errorf("fractions %v, want no repeats", got)
	}
	// 100 events/s for 60 s at 5 events per order: 1,200 orders.
	if got := ordersFor(100, time.Minute, 5); got != 1200 {
		t.Errorf("ordersFor = %d, want 1200", got)
	}
	if got := ordersFor(0.1, time.Second, 5); got != 1 {
		t.Errorf("ordersFor a tiny rate = %d, want 1", got)
	}
	rs := []cellResult{{Config: cellConfig{Fraction: 0.25}}, {Config: cellConfig{Fraction: 0.5}, Rate: 7}}
	if r, err := steadyResult(rs, 0.5); err != nil || r.Rate != 7 {
		t.Errorf("steadyResult = %v, %v", r.Rate, err)
	}
	if _, err := steadyResult(rs, 0.9); err == nil {
		t.Error("steadyResult found a rate that was not run")
	}
}

func TestOpenLoopDurations(t *testing.T) {
	p := openLoopPlan{Fractions: []float64{0.25, 0.75}, Steady: 0.5, Duration: time.Minute, Others: 30 * time.Second}
	for f, want := range map[float64]time.Duration{0.5: time.Minute, 0.25: 30 * time.Second, 0.75: 30 * time.Second} {
		if got := p.duration(f); got != want {
			t.Errorf("duration(%v) = %v, want %v", f, got, want)
		}
	}
	// A short run: the other rates are never offered longer than the
	// steady one.
	p.Duration = 8 * time.Second
	if got := p.duration(0.25); got != 8*time.Second {
		t.Errorf("duration(0.25) with an 8s steady rate = %v, want 8s", got)
	}
}
