// Package bus is Herald's only way onto NATS JetStream: subject names, the
// streams, consumers and KV buckets every service relies on (declared here, in
// one place, and created idempotently), publishing with deterministic message
// ids, and the consumer runner that retries, keeps long work alive and
// dead-letters what cannot be processed. It must not know any service's logic.
package bus
