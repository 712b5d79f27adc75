package telemetry

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ConsumerCounts is a durable consumer's backlog as the server reports it.
type ConsumerCounts struct {
	Pending     uint64 // stored, not yet delivered
	AckPending  uint64 // delivered, not yet acknowledged
	Redelivered uint64 // delivered more than once and not yet acknowledged
}

// ConsumerInfo reads a consumer's counts from the server.
type ConsumerInfo func(ctx context.Context) (ConsumerCounts, error)

type consumerKey struct{ stream, consumer string }

// consumerCollector asks the server, at scrape time, about the consumers
// this process runs; every process running a shared consumer reports the
// same figures (aggregate them with max, not sum).
type consumerCollector struct {
	mu    sync.Mutex
	infos map[consumerKey][]*ConsumerInfo
}

var consumers = &consumerCollector{infos: map[consumerKey][]*ConsumerInfo{}}

var (
	descPending = prometheus.NewDesc("herald_consumer_pending_messages",
		"Work waiting: messages stored for the consumer and not yet delivered.", []string{"stream", "consumer"}, nil)
	descAckPending = prometheus.NewDesc("herald_consumer_ack_pending_messages",
		"Work in hand: messages delivered and not yet acknowledged.", []string{"stream", "consumer"}, nil)
	descRedelivered = prometheus.NewDesc("herald_consumer_redelivered_messages",
		"Messages being redelivered: delivered more than once and not yet acknowledged.", []string{"stream", "consumer"}, nil)
)

// WatchConsumer reports a consumer's counts on /metrics until the returned
// function is called.
func WatchConsumer(stream, consumer string, info ConsumerInfo) (stop func()) {
	k, p := consumerKey{stream, consumer}, &info
	consumers.mu.Lock()
	consumers.infos[k] = append(consumers.infos[k], p)
	consumers.mu.Unlock()
	return func() {
		consumers.mu.Lock()
		defer consumers.mu.Unlock()
		list := consumers.infos[k]
		for i, q := range list {
			if q == p {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(consumers.infos, k)
		} else {
			consumers.infos[k] = list
		}
	}
}

func (c *consumerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPending
	ch <- descAckPending
	ch <- descRedelivered
}

func (c *consumerCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	watched := make(map[consumerKey]ConsumerInfo, len(c.infos))
	for k, list := range c.infos {
		watched[k] = *list[0]
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for k, info := range watched {
		n, err := info(ctx)
		if err != nil {
			continue // a scrape shows what it can; the server may be restarting
		}
		ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(n.Pending), k.stream, k.consumer)
		ch <- prometheus.MustNewConstMetric(descAckPending, prometheus.GaugeValue, float64(n.AckPending), k.stream, k.consumer)
		ch <- prometheus.MustNewConstMetric(descRedelivered, prometheus.GaugeValue, float64(n.Redelivered), k.stream, k.consumer)
	}
}
