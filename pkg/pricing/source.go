package pricing

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Where a price came from, the first word of a row's price_source.
const (
	SourceConfig  = "config"
	SourceBuiltin = "builtin"
	SourceUnknown = "unknown"
	// SourceImported: a price `herald prices import` put on the bus.
	SourceImported = "imported"
)

// Applied is what priced a row beyond its token counts: the tier
// (0: the base prices), the per-request fee (Requests 1) and the units of
// each named fee. Units are recorded even when the table has no price for
// them, so adding a price later can reprice the row.
type Applied struct {
	Source string
	// Since is when the entry that priced the row came into force (zero:
	// the model's only entry, or its first without since:).
	Since    time.Time
	Tier     int64
	Requests int64
	Fees     map[string]int64
}

// String is the row's price_source: the source alone when nothing else
// applied ("config"), else the source and ";key=value" parts in a fixed
// order: since, tier, requests, then the fees by name
// ("builtin;tier=200000;web_search=2", "config;since=2026-11-15").
func (a Applied) String() string {
	var b strings.Builder
	b.WriteString(a.Source)
	if !a.Since.IsZero() {
		b.WriteString(";since=" + FormatSince(a.Since))
	}
	if a.Tier > 0 {
		fmt.Fprintf(&b, ";tier=%d", a.Tier)
	}
	if a.Requests > 0 {
		fmt.Fprintf(&b, ";requests=%d", a.Requests)
	}
	for _, name := range a.feeNames() {
		fmt.Fprintf(&b, ";%s=%d", name, a.Fees[name])
	}
	return b.String()
}

// ParseSource reads a row's price_source back.
func ParseSource(s string) (Applied, error) {
	parts := strings.Split(s, ";")
	a := Applied{Source: parts[0]}
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(p, "=")
		if k == "since" && ok {
			t, err := ParseSince(v)
			if err != nil {
				return Applied{}, fmt.Errorf("price_source %q: %w", s, err)
			}
			a.Since = t
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil || n < 0 {
			return Applied{}, fmt.Errorf("price_source %q: %q is not key=count", s, p)
		}
		switch {
		case k == "tier":
			a.Tier = n
		case k == "requests":
			a.Requests = n
		case validFeeName(k):
			if a.Fees == nil {
				a.Fees = map[string]int64{}
			}
			a.Fees[k] = n
		default:
			return Applied{}, fmt.Errorf("price_source %q: %q is not a fee name", s, k)
		}
	}
	return a, nil
}

// Charges are the charges a row recorded, for repricing it.
func (a Applied) Charges() Charges {
	return Charges{Served: a.Requests > 0, Fees: a.Fees}
}
