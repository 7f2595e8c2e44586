package ratelimit

import (
	"fmt"
	"sync"
	"time"
)

// SlidingWindow lets at most Limit requests pass in any window of length Window. It keeps the counts of the
// current and the previous fixed window and weighs the previous one by how much of it still overlaps.
type SlidingWindow struct {
	mu       sync.Mutex
	clock    Clock
	limit    int
	window   time.Duration
	start    time.Time
	current  int
	previous int
}

// NewSlidingWindow returns a limiter of limit requests per window.
func NewSlidingWindow(clock Clock, limit int, window time.Duration) (*SlidingWindow, error) {
	if limit < 1 {
		return nil, fmt.Errorf("ratelimit: limit must be at least 1, got %d", limit)
	}
	if window <= 0 {
		return nil, fmt.Errorf("ratelimit: window must be positive, got %v", window)
	}
	return &SlidingWindow{clock: clock, limit: limit, window: window, start: clock.Now().Truncate(window)}, nil
}

// Allow counts the request if the weighted count stays within the limit.
func (w *SlidingWindow) Allow() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Now()
	w.advance(now)
	overlap := 1 - float64(now.Sub(w.start))/float64(w.window)
	estimate := float64(w.previous)*overlap + float64(w.current)
	if estimate+1 > float64(w.limit) {
		return false
	}
	w.current++
	return true
}

func (w *SlidingWindow) advance(now time.Time) {
	elapsed := now.Sub(w.start)
	if elapsed < w.window {
		return
	}
	if elapsed < 2*w.window {
		w.previous = w.current
	} else {
		w.previous = 0
	}
	w.current = 0
	w.start = now.Truncate(w.window)
}
