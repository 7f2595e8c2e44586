package ratelimit

import (
	"reflect"
	"testing"
	"time"
)

func TestRegistryLimitsEachClientOnItsOwn(t *testing.T) {
	clock := NewManualClock(epoch)
	reg := NewRegistry(clock, time.Minute, func() Limiter {
		b, _ := NewTokenBucket(clock, 1, 1)
		return b
	})
	if !reg.Allow("alice") || reg.Allow("alice") {
		t.Fatal("alice: want allow then deny")
	}
	if !reg.Allow("bob") {
		t.Fatal("bob was limited by alice's requests")
	}
	if got := reg.Clients(); !reflect.DeepEqual(got, []string{"alice", "bob"}) {
		t.Fatalf("clients = %v", got)
	}
}

func TestSweepForgetsIdleClients(t *testing.T) {
	clock := NewManualClock(epoch)
	reg := NewRegistry(clock, time.Minute, func() Limiter {
		b, _ := NewTokenBucket(clock, 1, 1)
		return b
	})
	reg.Allow("alice")
	clock.Advance(30 * time.Second)
	reg.Allow("bob")
	clock.Advance(45 * time.Second)
	if n := reg.Sweep(); n != 1 {
		t.Fatalf("swept %d clients, want 1", n)
	}
	if got := reg.Clients(); !reflect.DeepEqual(got, []string{"bob"}) {
		t.Fatalf("clients after sweep = %v", got)
	}
}
