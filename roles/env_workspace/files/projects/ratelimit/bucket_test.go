package ratelimit

import (
	"testing"
	"time"
)

var epoch = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func TestBucketStartsFull(t *testing.T) {
	clock := NewManualClock(epoch)
	b, err := NewTokenBucket(clock, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if !b.Allow() {
			t.Fatalf("request %d denied from a full bucket", i+1)
		}
	}
	if b.Allow() {
		t.Fatal("fourth request allowed from an empty bucket")
	}
}

func TestBucketRefillsAtItsRate(t *testing.T) {
	clock := NewManualClock(epoch)
	b, _ := NewTokenBucket(clock, 2, 2)
	b.AllowN(2)
	clock.Advance(500 * time.Millisecond)
	if got := b.Tokens(); got != 1 {
		t.Fatalf("tokens after 0.5 s at 2/s = %v, want 1", got)
	}
	clock.Advance(10 * time.Second)
	if got := b.Tokens(); got != 2 {
		t.Fatalf("tokens never exceed the burst: got %v, want 2", got)
	}
}

func TestAllowNTakesAllOrNothing(t *testing.T) {
	clock := NewManualClock(epoch)
	b, _ := NewTokenBucket(clock, 1, 5)
	if b.AllowN(6) {
		t.Fatal("AllowN(6) passed with 5 tokens")
	}
	if got := b.Tokens(); got != 5 {
		t.Fatalf("a denied AllowN took tokens: %v left", got)
	}
}

func TestBucketRejectsBadSettings(t *testing.T) {
	clock := NewManualClock(epoch)
	if _, err := NewTokenBucket(clock, 0, 1); err == nil {
		t.Error("rate 0 accepted")
	}
	if _, err := NewTokenBucket(clock, 1, 0); err == nil {
		t.Error("burst 0 accepted")
	}
}
