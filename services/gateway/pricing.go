package gateway

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/pricing"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Price sources recorded with every usage event (the first word of its
// price_source; pkg/pricing adds the entry's date, the tier and fees).
const (
	PriceConfig   = pricing.SourceConfig
	PriceBuiltin  = pricing.SourceBuiltin
	PriceUnknown  = pricing.SourceUnknown
	PriceImported = pricing.SourceImported
)

// Pricer prices usage: configured prices first, then imported ones (the
// herald_prices bucket, watched), then the built-in table (pkg/pricing
// holds the model and the list). Copies share one table.
type Pricer struct {
	config pricing.Table
	table  *atomic.Pointer[pricing.Table]
}

// NewPricer returns a Pricer with overrides keyed by model name.
func NewPricer(overrides map[string]config.Price) Pricer {
	t := pricing.NewTable(overrides)
	p := Pricer{config: t, table: &atomic.Pointer[pricing.Table]{}}
	p.table.Store(&t)
	return p
}

// setImported puts imported prices in force beside the configured ones.
func (p Pricer) setImported(imported map[string]pricing.Imported) {
	t := p.config.WithImported(imported)
	p.table.Store(&t)
}

// Lookup finds model's price in force now and where it came from.
func (p Pricer) Lookup(model string) (config.Price, string) { return p.table.Load().Lookup(model) }

// CostNano prices u for model in nano-USD, as one request served now with
// no fees. Output tokens include reasoning tokens under every provider's
// convention, so reasoning is not added again.
func (p Pricer) CostNano(model string, u *heraldpb.Usage) (uint64, string) {
	return p.Charge(model, time.Now(), u, pricing.Charges{})
}

// Charge prices one attempt made at time at: its tokens and what else the
// provider reported; the source names the entry, tier and fees applied.
func (p Pricer) Charge(model string, at time.Time, u *heraldpb.Usage, c pricing.Charges) (uint64, string) {
	if u == nil {
		u = &heraldpb.Usage{}
	}
	return p.table.Load().CostAt(model, at, u, c)
}

// watchPrices keeps the imported prices of the herald_prices bucket in
// force until ctx ends: every put or delete there is in force for the
// gateway's next call. A value that does not decode is logged and left out.
func (p Pricer) watchPrices(ctx context.Context, js jetstream.JetStream, log zerolog.Logger) error {
	kv, err := js.KeyValue(ctx, bus.BucketPrices)
	if err != nil {
		return err
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return err
	}
	go func() {
		defer func() { _ = w.Stop() }()
		imported := map[string]pricing.Imported{}
		initial := true
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil { // the bucket's current values are all in
					initial = false
					p.setImported(copyImported(imported))
					log.Info().Int("models", len(imported)).Msg("imported prices in force")
					continue
				}
				model, err := bus.ModelOfPriceKey(e.Key())
				if err != nil {
					log.Warn().Err(err).Msg("imported price left out")
					continue
				}
				if e.Operation() != jetstream.KeyValuePut {
					delete(imported, model)
				} else if imp, err := bus.DecodeImported(e.Key(), e.Value()); err != nil {
					log.Warn().Err(err).Msg("imported price left out")
					delete(imported, model)
				} else {
					imported[model] = imp
				}
				if !initial {
					p.setImported(copyImported(imported))
				}
			}
		}
	}()
	return nil
}

func copyImported(m map[string]pricing.Imported) map[string]pricing.Imported {
	out := make(map[string]pricing.Imported, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
