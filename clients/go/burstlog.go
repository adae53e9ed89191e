package sluice

// A dead daemon fails every request of a busy service; one log line per failure would bury
// the log (and cost more than the request). This writes the first failure of a burst at
// once and then at most one line per interval, saying how many failures it stands for.

import (
	"log"
	"sync"
	"time"
)

// burstLog writes at most one line per interval.
type burstLog struct {
	logger   *log.Logger
	interval time.Duration
	what     string // what failed: "checks", "charges"

	mu      sync.Mutex
	last    time.Time // when the last line was written; zero before the first
	pending uint64    // failures since the last line
}

func (b *burstLog) failure(err error) {
	now := time.Now()
	b.mu.Lock()
	b.pending++
	if !b.last.IsZero() && now.Sub(b.last) < b.interval {
		b.mu.Unlock()
		return
	}
	n := b.pending
	b.pending = 0
	b.last = now
	b.mu.Unlock()
	// Written outside the lock: a slow log sink must not serialise the failing requests.
	b.logger.Printf("%v (%d failed %s since the last report)", err, n, b.what)
}
