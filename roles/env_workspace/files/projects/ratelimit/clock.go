// Package ratelimit limits how often each client may make a request.
package ratelimit

import "time"

// Clock tells the time; tests and log replays use a ManualClock instead of the wall clock.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns the current time.
func (SystemClock) Now() time.Time { return time.Now() }

// ManualClock is a clock that moves only when told to.
type ManualClock struct {
	t time.Time
}

// NewManualClock returns a clock standing at t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{t: t} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time { return c.t }

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) { c.t = c.t.Add(d) }

// Set moves the clock to t (never backwards).
func (c *ManualClock) Set(t time.Time) {
	if t.After(c.t) {
		c.t = t
	}
}
