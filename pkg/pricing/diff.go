package pricing

import (
	"encoding/json"
	"sort"
	"strings"
	"time"
)

// ImportPlan is what importing a catalogue changes: models it adds, models
// whose imported prices it changes, how many it leaves as they were, and
// the models herald.yaml prices itself, whose configured entries stay in
// force (the operator's word wins; the catalogue's are stored beside them).
type ImportPlan struct {
	Format    string      `json:"format"`
	Added     []string    `json:"added"`
	Changed   []string    `json:"changed"`
	Unchanged int         `json:"unchanged"`
	Kept      []KeptEntry `json:"kept_from_config"`
	Skipped   []string    `json:"skipped,omitempty"`
	Put       []Imported  `json:"-"`
}

// KeptEntry is a model priced both in herald.yaml and by the catalogue: the
// configured price in force now, which keeps pricing it, and the
// catalogue's.
type KeptEntry struct {
	Model      string `json:"model"`
	Configured Price  `json:"configured"`
	Catalogue  Price  `json:"catalogue"`
}

// PlanImport compares cat with the prices already imported (old) and
// those configured.
func PlanImport(cat Catalogue, old map[string]Imported, config map[string]Price, now time.Time) ImportPlan {
	plan := ImportPlan{Format: cat.Format, Added: []string{}, Changed: []string{}, Kept: []KeptEntry{}, Skipped: cat.Skipped}
	names := make([]string, 0, len(cat.Models))
	for name := range cat.Models {
		names = append(names, name)
	}
	sort.Strings(names)
	table := NewTable(config)
	for _, name := range names {
		imp := cat.Models[name]
		entries := table.Configured(name)
		if entries == nil {
			// herald.yaml's short name prices "vendor/model" too
			if i := strings.LastIndex(name, "/"); i >= 0 {
				entries = table.Configured(name[i+1:])
			}
		}
		if entries != nil {
			conf, ok := inForce(entries, now)
			catp, ok2 := inForce(imp.Prices, now)
			if ok && ok2 && !samePrice(conf, catp) {
				plan.Kept = append(plan.Kept, KeptEntry{Model: name, Configured: conf, Catalogue: catp})
			}
		}
		prev, had := old[name]
		switch {
		case !had:
			plan.Added = append(plan.Added, name)
		case sameImport(prev, imp):
			plan.Unchanged++
			continue
		default:
			plan.Changed = append(plan.Changed, name)
		}
		plan.Put = append(plan.Put, imp)
	}
	return plan
}

func samePrice(a, b Price) bool {
	a.Dated, b.Dated, a.Since, b.Since = nil, nil, time.Time{}, time.Time{}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func sameImport(a, b Imported) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
