package gateway

import "sync/atomic"

// Stats counts what this gateway process has done since it started; the
// gateway logs failures, and counts successes instead of logging each one.
type Stats struct {
	// Calls is how many requests were answered (with a message or an error).
	Calls int64
	// Failed is how many of them were answered with an error.
	Failed int64
	// Attempts is how many provider requests were made (each one billed).
	Attempts int64
	// Retries and Fallbacks count the attempts that were retries on the same
	// provider and the switches to the next provider of the chain.
	Retries   int64
	Fallbacks int64
	// Stale is how many redelivered requests were dropped unsent because
	// their session had moved past them (see stale.go).
	Stale int64
}

type counters struct {
	calls, failed, attempts, retries, fallbacks, stale atomic.Int64
}

// Stats returns the counters so far.
func (s *Service) Stats() Stats {
	c := &s.counters
	return Stats{Calls: c.calls.Load(), Failed: c.failed.Load(), Attempts: c.attempts.Load(),
		Retries: c.retries.Load(), Fallbacks: c.fallbacks.Load(), Stale: c.stale.Load()}
}
