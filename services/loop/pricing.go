package loop

import (
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
)

// TurnPricing counts a turn's model calls by whether their model had a
// price: a call without one has an unknown cost, not a zero cost.
type TurnPricing struct {
	Priced         int      `json:"priced,omitempty"`
	Unpriced       int      `json:"unpriced,omitempty"`
	UnpricedModels []string `json:"unpriced_models,omitempty"`
}

// addPricing counts the calls p reports (nil: a gateway from before
// pricing was reported, whose calls are taken as priced, as they were).
func (st *State) addPricing(p *heraldpb.Pricing, calls int) {
	if p == nil {
		st.Pricing.Priced += calls
		return
	}
	st.Pricing.Priced += int(p.GetPricedCalls())
	st.Pricing.Unpriced += int(p.GetUnpricedCalls())
	st.SessionUnpriced += int(p.GetUnpricedCalls())
	st.Pricing.UnpricedModels = proto.AddModels(st.Pricing.UnpricedModels, p.GetUnpricedModels()...)
}

// costStatus is the turn's cost status for its result.
func (st *State) costStatus() string {
	return proto.CostStatus(st.Pricing.Priced, st.Pricing.Unpriced)
}

// pricingProto is the turn's pricing, reported to a parent session.
func (st *State) pricingProto() *heraldpb.Pricing {
	return &heraldpb.Pricing{PricedCalls: int32(st.Pricing.Priced), UnpricedCalls: int32(st.Pricing.Unpriced),
		UnpricedModels: st.Pricing.UnpricedModels}
}
