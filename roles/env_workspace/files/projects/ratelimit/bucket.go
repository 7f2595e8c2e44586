package ratelimit

import (
	"fmt"
	"sync"
	"time"
)

// Limiter decides whether one more request may pass now.
type Limiter interface {
	Allow() bool
}

// TokenBucket holds up to Burst tokens and gains Rate tokens per second; each request takes one.
type TokenBucket struct {
	mu     sync.Mutex
	clock  Clock
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

// NewTokenBucket returns a full bucket. rate is in tokens per second and must be positive; burst at least 1.
func NewTokenBucket(clock Clock, rate float64, burst int) (*TokenBucket, error) {
	if rate <= 0 {
		return nil, fmt.Errorf("ratelimit: rate must be positive, got %v", rate)
	}
	if burst < 1 {
		return nil, fmt.Errorf("ratelimit: burst must be at least 1, got %d", burst)
	}
	return &TokenBucket{clock: clock, rate: rate, burst: float64(burst), tokens: float64(burst), last: clock.Now()}, nil
}

// Allow takes a token if one is there.
func (b *TokenBucket) Allow() bool {
	return b.AllowN(1)
}

// AllowN takes n tokens at once if that many are there; otherwise it takes none.
func (b *TokenBucket) AllowN(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	if float64(n) > b.tokens {
		return false
	}
	b.tokens -= float64(n)
	return true
}

// Tokens returns the tokens available now.
func (b *TokenBucket) Tokens() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	return b.tokens
}

func (b *TokenBucket) refill() {
	now := b.clock.Now()
	elapsed := now.Sub(b.last).Seconds()
	if elapsed <= 0 {
		return
	}
	b.tokens += elapsed * b.rate
	if b.tokens > b.burst {
		b.tokens = b.burst
	}
	b.last = now
}
