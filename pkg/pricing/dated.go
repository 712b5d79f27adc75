package pricing

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// A model's prices may change: herald.yaml may list several entries for it,
// each in force from its `since:` (a date, midnight UTC, or an RFC 3339
// time) until the next one's. An entry without since: is in force from the
// beginning. A row is priced by the entry in force at its time, and its
// price_source names that entry (";since=2026-11-15").
//
//	pricing:
//	  my-model: {input: 1, output: 2}            # one price, as always
//	  other-model:
//	    - {input: 1, output: 2}                  # until 2026-11-15
//	    - {since: 2026-11-15, input: 1.5, output: 3}

// sinceLayouts are the forms since: accepts.
var sinceLayouts = []string{"2006-01-02", time.RFC3339}

// ParseSince reads a since: value: a date (midnight UTC) or an RFC 3339
// time, kept to the second (rows are stored to the second).
func ParseSince(s string) (time.Time, error) {
	for _, layout := range sinceLayouts {
		if t, err := time.Parse(layout, strings.TrimSpace(s)); err == nil {
			return t.UTC().Truncate(time.Second), nil
		}
	}
	return time.Time{}, fmt.Errorf("since: %q is neither a date (2026-11-15) nor an RFC 3339 time (2026-11-15T09:00:00Z)", s)
}

// FormatSince is since as price_source and reports write it: the date alone
// at midnight UTC, else the RFC 3339 time.
func FormatSince(t time.Time) string {
	t = t.UTC()
	if t.Equal(t.Truncate(24 * time.Hour)) {
		return t.Format("2006-01-02")
	}
	return t.Format(time.RFC3339)
}

// plainPrice is Price without its YAML method, to decode a mapping into.
type plainPrice Price

// UnmarshalYAML reads one entry (a mapping, with or without since:) or a
// model's dated entries (a sequence of them). Of a sequence, the Price is
// the latest entry and Dated holds them all, oldest first.
func (p *Price) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.SequenceNode {
		entries := make([]Price, 0, len(n.Content))
		for _, item := range n.Content {
			if item.Kind != yaml.MappingNode {
				return fmt.Errorf("line %d: a dated price is a mapping (since: 2026-11-15, input: ..., output: ...)", item.Line)
			}
			var e Price
			if err := e.UnmarshalYAML(item); err != nil {
				return err
			}
			entries = append(entries, e)
		}
		if len(entries) == 0 {
			return fmt.Errorf("line %d: an empty list of prices", n.Line)
		}
		entries, err := sortDated(entries)
		if err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		*p = entries[len(entries)-1]
		p.Dated = entries
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: a price is a mapping (input: ..., output: ...) or a list of dated ones", n.Line)
	}
	rest := *n
	rest.Content = nil
	var since time.Time
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Value == "since" {
			t, err := ParseSince(v.Value)
			if err != nil {
				return fmt.Errorf("line %d: %w", v.Line, err)
			}
			since = t
			continue
		}
		rest.Content = append(rest.Content, k, v)
	}
	var plain plainPrice
	if err := rest.Decode(&plain); err != nil {
		return err
	}
	*p = Price(plain)
	p.Since = since
	return nil
}

// sortDated orders a model's entries by since and refuses two in force from
// the same time (which one priced a row would be a guess).
func sortDated(entries []Price) ([]Price, error) {
	out := make([]Price, len(entries))
	for i, e := range entries {
		e.Dated = nil
		out[i] = e
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Since.Before(out[j].Since) })
	for i := 1; i < len(out); i++ {
		if out[i].Since.Equal(out[i-1].Since) {
			if out[i].Since.IsZero() {
				return nil, fmt.Errorf("two prices without since:; all but the first need one")
			}
			return nil, fmt.Errorf("two prices since %s", FormatSince(out[i].Since))
		}
	}
	return out, nil
}

// Entries are p's dated entries, oldest first: Dated, or p alone.
func (p Price) Entries() []Price {
	if len(p.Dated) > 0 {
		return p.Dated
	}
	one := p
	one.Dated = nil
	return []Price{one}
}

// inForce is the entry of entries (oldest first) in force at t: the latest
// whose since is not after t; ok false when t is before them all.
func inForce(entries []Price, t time.Time) (Price, bool) {
	for i := len(entries) - 1; i >= 0; i-- {
		if !entries[i].Since.After(t) {
			return entries[i], true
		}
	}
	return Price{}, false
}
