package proto

import "slices"

// Cost statuses of a result (DESIGN.md contract additions 2026-12-03): a
// model without a price makes the cost unknown, never zero.
const (
	CostExact   = "exact"   // every model call of the turn had a price
	CostPartial = "partial" // some did: cost_usd is a lower bound
	CostUnknown = "unknown" // none did: cost_usd says nothing
)

// CostStatus is the status of a cost made of priced and unpriced calls.
func CostStatus(priced, unpriced int) string {
	switch {
	case unpriced == 0:
		return CostExact
	case priced == 0:
		return CostUnknown
	}
	return CostPartial
}

// AddModels adds the names of more not present in list, keeping it sorted.
func AddModels(list []string, more ...string) []string {
	for _, m := range more {
		if m != "" && !slices.Contains(list, m) {
			list = append(list, m)
		}
	}
	slices.Sort(list)
	return list
}
