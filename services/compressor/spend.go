package compressor

import (
	"github.com/heraldrun/herald/proto/heraldpb"
)

// spend is what a compression's summary call cost: the gateway bills it to
// the session (purpose compression), and the result carries it so the loop
// counts it in the turn's usage, cost and budget.
type spend struct {
	usage    *heraldpb.Usage
	costUSD  float64
	apiCalls int32
	pricing  *heraldpb.Pricing
}

// spendOf is the spending a summary response reports, failed ones included:
// an attempt that failed after the provider reported usage is billed too.
func spendOf(resp *heraldpb.LLMResponse) spend {
	if resp == nil {
		return spend{}
	}
	calls := resp.Attempts
	if calls < 1 {
		calls = 1
	}
	return spend{usage: resp.Usage, costUSD: resp.CostUsd, apiCalls: calls, pricing: resp.Pricing}
}
