package ratelimit

import (
	"testing"
	"time"
)

func TestWindowCountsUpToTheLimit(t *testing.T) {
	clock := NewManualClock(epoch)
	w, err := NewSlidingWindow(clock, 3, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if !w.Allow() {
			t.Fatalf("request %d denied below the limit", i+1)
		}
	}
	if w.Allow() {
		t.Fatal("request over the limit allowed")
	}
}

func TestWindowWeighsThePreviousWindow(t *testing.T) {
	clock := NewManualClock(epoch)
	w, _ := NewSlidingWindow(clock, 4, time.Second)
	for i := 0; i < 4; i++ {
		w.Allow()
	}
	// Half-way through the next window half of the previous 4 still count: 2 more may pass.
	clock.Advance(1500 * time.Millisecond)
	allowed := 0
	for i := 0; i < 4; i++ {
		if w.Allow() {
			allowed++
		}
	}
	if allowed != 2 {
		t.Fatalf("allowed %d half-way into the next window, want 2", allowed)
	}
}

func TestWindowForgetsAfterTwoWindows(t *testing.T) {
	clock := NewManualClock(epoch)
	w, _ := NewSlidingWindow(clock, 2, time.Second)
	w.Allow()
	w.Allow()
	clock.Advance(2 * time.Second)
	if !w.Allow() || !w.Allow() {
		t.Fatal("old requests still counted two windows later")
	}
}
