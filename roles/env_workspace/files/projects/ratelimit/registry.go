package ratelimit

import (
	"sort"
	"sync"
	"time"
)

// Registry keeps one limiter per client, made on first use, and forgets clients idle for longer than IdleTTL.
type Registry struct {
	mu      sync.Mutex
	clock   Clock
	factory func() Limiter
	idleTTL time.Duration
	entries map[string]*entry
}

type entry struct {
	limiter  Limiter
	lastSeen time.Time
}

// NewRegistry returns an empty registry; factory makes the limiter of a new client.
func NewRegistry(clock Clock, idleTTL time.Duration, factory func() Limiter) *Registry {
	return &Registry{clock: clock, factory: factory, idleTTL: idleTTL, entries: map[string]*entry{}}
}

// Allow asks the client's limiter.
func (r *Registry) Allow(client string) bool {
	r.mu.Lock()
	e, ok := r.entries[client]
	if !ok {
		e = &entry{limiter: r.factory()}
		r.entries[client] = e
	}
	e.lastSeen = r.clock.Now()
	r.mu.Unlock()
	return e.limiter.Allow()
}

// Sweep forgets the clients idle for longer than the TTL and returns how many it forgot.
func (r *Registry) Sweep() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	removed := 0
	for client, e := range r.entries {
		if now.Sub(e.lastSeen) > r.idleTTL {
			delete(r.entries, client)
			removed++
		}
	}
	return removed
}

// Clients returns the clients the registry holds, sorted.
func (r *Registry) Clients() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.entries))
	for client := range r.entries {
		out = append(out, client)
	}
	sort.Strings(out)
	return out
}
