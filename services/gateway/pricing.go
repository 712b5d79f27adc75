package gateway

import (
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/pricing"
	"github.com/heraldrun/herald/proto/heraldpb"
)

// Price sources recorded with every usage event (the first word of its
// price_source; pkg/pricing adds the tier and fees applied).
const (
	PriceConfig  = pricing.SourceConfig
	PriceBuiltin = pricing.SourceBuiltin
	PriceUnknown = pricing.SourceUnknown
)

// Pricer prices usage: configured prices first, then the built-in table
// (pkg/pricing holds both the model and the list).
type Pricer struct {
	table pricing.Table
}

// NewPricer returns a Pricer with overrides keyed by model name.
func NewPricer(overrides map[string]config.Price) Pricer {
	return Pricer{table: pricing.NewTable(overrides)}
}

// Lookup finds model's price and where it came from.
func (p Pricer) Lookup(model string) (config.Price, string) { return p.table.Lookup(model) }

// CostNano prices u for model in nano-USD, as one request served with no
// fees. Output tokens include reasoning tokens under every provider's
// convention, so reasoning is not added again.
func (p Pricer) CostNano(model string, u *heraldpb.Usage) (uint64, string) {
	return p.Charge(model, u, pricing.Charges{})
}

// Charge prices one attempt: its tokens and what else the provider
// reported; the source names the tier and fees applied.
func (p Pricer) Charge(model string, u *heraldpb.Usage, c pricing.Charges) (uint64, string) {
	if u == nil {
		u = &heraldpb.Usage{}
	}
	return p.table.Cost(model, u, c)
}
