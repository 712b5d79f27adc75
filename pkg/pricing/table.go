package pricing

import (
	"strings"

	"github.com/heraldrun/herald/proto/heraldpb"
)

// Table finds a model's price: the configured prices first (by the full
// model name, then the name after its last "/"), then the built-in list by
// longest name prefix, so dated snapshots ("claude-sonnet-4-5-20250929")
// find their family.
type Table struct {
	config map[string]Price
}

// NewTable is a table whose configured prices are config, by model name.
func NewTable(config map[string]Price) Table { return Table{config: config} }

// Lookup finds model's price and its source (SourceUnknown: no price).
func (t Table) Lookup(model string) (Price, string) {
	short := model
	if i := strings.LastIndex(model, "/"); i >= 0 {
		short = model[i+1:]
	}
	for _, name := range []string{model, short} {
		if p, ok := t.config[name]; ok {
			return p, SourceConfig
		}
	}
	best := ""
	for prefix := range builtin {
		if strings.HasPrefix(short, prefix) && len(prefix) > len(best) {
			best = prefix
		}
	}
	if best == "" {
		return Price{}, SourceUnknown
	}
	return builtin[best], SourceBuiltin
}

// Cost prices one request of model in nano-USD and returns its
// price_source (Applied.String). An unpriced model costs 0, and its row
// still records the fees the provider reported.
func (t Table) Cost(model string, u *heraldpb.Usage, c Charges) (uint64, string) {
	p, src := t.Lookup(model)
	nano, a := p.Cost(u, c)
	if src == SourceUnknown {
		nano, a.Tier, a.Requests = 0, 0, 0
	}
	a.Source = src
	return nano, a.String()
}

// Reprice is the cost of a stored row from its usage, its price_source and
// p: what the row was charged for, priced again.
func Reprice(p Price, u *heraldpb.Usage, source string) (uint64, error) {
	a, err := ParseSource(source)
	if err != nil {
		return 0, err
	}
	nano, _ := p.Cost(u, a.Charges())
	return nano, nil
}
