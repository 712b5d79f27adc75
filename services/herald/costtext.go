package main

import (
	"fmt"
	"strings"

	"github.com/heraldrun/herald/proto"
)

// costText shows a cost as what is known of it: a model without a price
// makes it a lower bound (≥) or unknown (n/a), never a made-up $0.
func costText(usd float64, status string, unpriced []string) string {
	switch status {
	case proto.CostUnknown:
		return "n/a (" + unpricedNote(unpriced) + ")"
	case proto.CostPartial:
		return fmt.Sprintf("≥ $%.6f (%s)", usd, unpricedNote(unpriced))
	}
	return fmt.Sprintf("$%.6f", usd)
}

func resultCost(res proto.Result) string {
	return costText(res.CostUSD, res.CostStatus, res.UnpricedModels)
}

func unpricedNote(models []string) string {
	switch len(models) {
	case 0:
		return "model unpriced"
	case 1:
		return "model " + models[0] + " unpriced"
	}
	return "models " + strings.Join(models, ", ") + " unpriced"
}

// sessionCost is a session's cost so far, a lower bound once any of its
// calls had no price.
func sessionCost(usd float64, unpricedCalls int) string {
	if unpricedCalls == 0 {
		return fmt.Sprintf("$%.6f", usd)
	}
	if usd == 0 {
		return fmt.Sprintf("n/a (%d unpriced calls)", unpricedCalls)
	}
	return fmt.Sprintf("≥ $%.6f (%d unpriced calls)", usd, unpricedCalls)
}
