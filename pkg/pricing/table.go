package pricing

import (
	"sort"
	"strings"
	"time"

	"github.com/heraldrun/herald/proto/heraldpb"
)

// Table finds a model's price at a time: the configured prices first (by
// the full model name, then the name after its last "/"), then imported
// ones (`herald prices import`: by name, then by the catalogue's name
// prefixes), then the built-in list by longest name prefix, so dated
// snapshots ("claude-sonnet-4-5-20250929") find their family. Of a model's
// dated entries, the one in force at the time prices; a time before all of
// a source's entries falls through to the next source.
type Table struct {
	config   map[string][]Price
	imported map[string]Imported
	// prefixes are imported models' name prefixes, longest first.
	prefixes []prefixOf
}

type prefixOf struct{ prefix, model string }

// NewTable is a table whose configured prices are config, by model name.
func NewTable(config map[string]Price) Table {
	t := Table{config: make(map[string][]Price, len(config))}
	for name, p := range config {
		entries, err := sortDated(p.Entries())
		if err != nil {
			entries = p.Entries() // Validate refused it at load; keep its order
		}
		t.config[name] = entries
	}
	return t
}

// WithImported is t with imported prices (by model name) beside its
// configured ones, which win where both price a model.
func (t Table) WithImported(imported map[string]Imported) Table {
	out := Table{config: t.config, imported: imported}
	for name, imp := range imported {
		for _, p := range imp.Prefixes {
			out.prefixes = append(out.prefixes, prefixOf{prefix: p, model: name})
		}
	}
	sort.Slice(out.prefixes, func(i, j int) bool {
		a, b := out.prefixes[i], out.prefixes[j]
		if len(a.prefix) != len(b.prefix) {
			return len(a.prefix) > len(b.prefix)
		}
		return a.prefix+"\x00"+a.model < b.prefix+"\x00"+b.model
	})
	return out
}

// Imported is the table's imported prices, by model name.
func (t Table) Imported() map[string]Imported { return t.imported }

// Configured is model's entries in herald.yaml (nil: none), by its full
// name only.
func (t Table) Configured(model string) []Price { return t.config[model] }

// Lookup finds model's price in force now and its source (SourceUnknown:
// no price).
func (t Table) Lookup(model string) (Price, string) {
	p, a := t.LookupAt(model, time.Now())
	return p, a.Source
}

// LookupAt finds the entry pricing model at time at: the price, and its
// source and since (an Applied with nothing else set).
func (t Table) LookupAt(model string, at time.Time) (Price, Applied) {
	short := model
	if i := strings.LastIndex(model, "/"); i >= 0 {
		short = model[i+1:]
	}
	names := []string{model, short}
	for _, name := range names {
		if p, ok := t.entry(t.config[name], at); ok {
			return p, Applied{Source: SourceConfig, Since: p.Since}
		}
	}
	for _, name := range names {
		if imp, ok := t.imported[name]; ok {
			if p, ok := t.entry(imp.Prices, at); ok {
				return p, Applied{Source: SourceImported, Since: p.Since}
			}
		}
	}
	for _, pre := range t.prefixes {
		if strings.HasPrefix(short, pre.prefix) || strings.HasPrefix(model, pre.prefix) {
			if p, ok := t.entry(t.imported[pre.model].Prices, at); ok {
				return p, Applied{Source: SourceImported, Since: p.Since}
			}
		}
	}
	best := ""
	for prefix := range builtin {
		if strings.HasPrefix(short, prefix) && len(prefix) > len(best) {
			best = prefix
		}
	}
	if best == "" {
		return Price{}, Applied{Source: SourceUnknown}
	}
	return builtin[best], Applied{Source: SourceBuiltin}
}

// entry is the entry of entries in force at at. A model's only entry
// without since: records no since (as before dated prices).
func (Table) entry(entries []Price, at time.Time) (Price, bool) {
	if len(entries) == 0 {
		return Price{}, false
	}
	return inForce(entries, at)
}

// Cost prices one request of model made now in nano-USD and returns its
// price_source (Applied.String). An unpriced model costs 0, and its row
// still records the fees the provider reported.
func (t Table) Cost(model string, u *heraldpb.Usage, c Charges) (uint64, string) {
	return t.CostAt(model, time.Now(), u, c)
}

// CostAt prices one request of model made at time at.
func (t Table) CostAt(model string, at time.Time, u *heraldpb.Usage, c Charges) (uint64, string) {
	p, found := t.LookupAt(model, at)
	nano, a := p.Cost(u, c)
	if found.Source == SourceUnknown {
		nano, a.Tier, a.Requests = 0, 0, 0
	}
	a.Source, a.Since = found.Source, found.Since
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

// RepriceAt prices a stored row again with the entry t has in force at the
// row's time: its new cost and price_source. The charges (requests, fee
// units) are the ones the row recorded.
func (t Table) RepriceAt(model string, at time.Time, u *heraldpb.Usage, source string) (uint64, string, error) {
	a, err := ParseSource(source)
	if err != nil {
		return 0, "", err
	}
	c := a.Charges()
	if a.Source == SourceUnknown {
		// An unpriced row recorded no request fee (it had no price); the
		// provider served it if it counted tokens.
		c.Served = u.GetInputTokens()+u.GetOutputTokens()+u.GetCacheReadTokens()+u.GetCacheWriteTokens() > 0
	}
	nano, src := t.CostAt(model, at, u, c)
	return nano, src, nil
}
