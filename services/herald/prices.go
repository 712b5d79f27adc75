package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/pricing"
	"github.com/heraldrun/herald/services/herald/internal/app"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const pricesUsage = `usage: herald prices import FILE [--json] | list [--json]`

// cmdPrices imports a public price catalogue onto the bus (every running
// gateway prices its next call with it) and lists the prices in force.
func cmdPrices(ctx context.Context, args []string, cio cliIO) int {
	fs := newFlagSet("prices", cio.err)
	var c common
	c.register(fs)
	jsonOut := fs.Bool("json", false, "print JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) == 0 || (pos[0] == "import") != (len(pos) == 2) || len(pos) > 2 || (pos[0] != "import" && pos[0] != "list") {
		fmt.Fprintln(cio.err, pricesUsage)
		return exitUsage
	}
	cfg, err := c.load()
	if err != nil {
		fmt.Fprintln(cio.err, "herald prices:", err)
		return exitUsage
	}
	var cat pricing.Catalogue
	if pos[0] == "import" {
		data, err := os.ReadFile(pos[1])
		if err != nil {
			fmt.Fprintln(cio.err, "herald prices import:", err)
			return exitUsage
		}
		if cat, err = pricing.ParseCatalogue(data); err != nil {
			fmt.Fprintf(cio.err, "herald prices import: %s: %v\n", pos[1], err)
			return exitUsage
		}
	}
	// a laptop that never ran Herald has no store yet: the import makes it
	_ = os.MkdirAll(filepath.Join(cfg.DataDir, "nats"), 0o700)
	js, closeFn, err := openBus(cfg)
	if err != nil {
		fmt.Fprintln(cio.err, "herald prices:", err)
		return exitFail
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	kv, err := pricesBucket(ctx, js, cfg.Replicas)
	if err != nil {
		fmt.Fprintln(cio.err, "herald prices:", err)
		return exitFail
	}
	old, bad, err := bus.LoadImportedPrices(ctx, kv)
	if err != nil {
		fmt.Fprintln(cio.err, "herald prices:", err)
		return exitFail
	}
	for _, e := range bad {
		fmt.Fprintln(cio.err, "herald prices: left out:", e)
	}
	if pos[0] == "list" {
		return listPrices(cio, cfg, old, *jsonOut)
	}
	plan := pricing.PlanImport(cat, old, cfg.Pricing, time.Now())
	for _, imp := range plan.Put {
		if err := bus.PutImportedPrice(ctx, kv, imp); err != nil {
			fmt.Fprintf(cio.err, "herald prices import: store %s: %v\n", imp.Model, err)
			return exitFail
		}
	}
	return printReport(cio, "herald prices import", plan, *jsonOut, func(w io.Writer) error { return writeImportPlan(w, pos[1], plan) })
}

// pricesBucket opens the imported prices' bucket, creating it on a server
// declared by an older Herald.
func pricesBucket(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, bus.BucketPrices)
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return kv, err
	}
	for _, cfg := range bus.Buckets(replicas) {
		if cfg.Bucket == bus.BucketPrices {
			return js.CreateOrUpdateKeyValue(ctx, cfg)
		}
	}
	return nil, err
}

func writeImportPlan(w io.Writer, file string, plan pricing.ImportPlan) error {
	fmt.Fprintf(w, "imported %s (%s): %d models added, %d changed, %d unchanged; in force for every gateway's next call\n",
		file, plan.Format, len(plan.Added), len(plan.Changed), plan.Unchanged)
	names := func(label string, list []string) {
		if len(list) == 0 {
			return
		}
		shown := list
		if len(shown) > 20 {
			shown = shown[:20]
		}
		more := ""
		if len(list) > len(shown) {
			more = fmt.Sprintf(" and %d more (--json lists them all)", len(list)-len(shown))
		}
		fmt.Fprintf(w, "%s: %s%s\n", label, strings.Join(shown, ", "), more)
	}
	names("added", plan.Added)
	names("changed", plan.Changed)
	if len(plan.Kept) > 0 {
		fmt.Fprintf(w, "kept from herald.yaml (%d models: the operator's price stays in force over the catalogue's):\n", len(plan.Kept))
		for _, k := range plan.Kept {
			fmt.Fprintf(w, "  %s: herald.yaml %s; catalogue %s\n", k.Model, priceText(k.Configured), priceText(k.Catalogue))
		}
	}
	if len(plan.Skipped) > 0 {
		fmt.Fprintf(w, "not imported (%d):\n", len(plan.Skipped))
		for _, s := range plan.Skipped {
			fmt.Fprintln(w, "  "+s)
		}
	}
	return nil
}

// priceText is a price in USD per million tokens, as herald.yaml writes it.
func priceText(p pricing.Price) string {
	s := fmt.Sprintf("input %g, output %g", p.Input, p.Output)
	if p.CacheRead > 0 {
		s += fmt.Sprintf(", cache_read %g", p.CacheRead)
	}
	if p.CacheWrite > 0 {
		s += fmt.Sprintf(", cache_write %g", p.CacheWrite)
	}
	if p.PerRequest > 0 {
		s += fmt.Sprintf(", per_request %g", p.PerRequest)
	}
	if len(p.Tiers) > 0 {
		s += fmt.Sprintf(", %d tier(s)", len(p.Tiers))
	}
	return s
}

// priceRow is one entry of `herald prices list`.
type priceRow struct {
	Model  string        `json:"model"`
	Source string        `json:"source"`
	Since  string        `json:"since,omitempty"`
	Price  pricing.Price `json:"price"`
}

// listPrices lists every configured and imported entry, by model and date
// (the built-in list is not repeated).
func listPrices(cio cliIO, cfg config.Config, imported map[string]pricing.Imported, jsonOut bool) int {
	var rows []priceRow
	add := func(model, source string, entries []pricing.Price) {
		for _, p := range entries {
			r := priceRow{Model: model, Source: source, Price: p}
			if !p.Since.IsZero() {
				r.Since = pricing.FormatSince(p.Since)
			}
			rows = append(rows, r)
		}
	}
	for model, p := range cfg.Pricing {
		add(model, pricing.SourceConfig, p.Entries())
	}
	for model, imp := range imported {
		add(model, pricing.SourceImported+":"+imp.Catalogue, imp.Prices)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].Model != rows[j].Model {
			return rows[i].Model < rows[j].Model
		}
		return rows[i].Source < rows[j].Source
	})
	if jsonOut {
		printJSONList(cio.out, rows)
		return exitOK
	}
	tw := tabwriter.NewWriter(cio.out, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tSOURCE\tSINCE\tPRICE (USD per million tokens)")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Model, r.Source, r.Since, priceText(r.Price))
	}
	_ = tw.Flush()
	return exitOK
}

// importedPriceSource is the price_source word model would be priced by
// with the imported prices of the NATS at cfg's URL ("" when none answers
// or none prices it), for doctor.
func importedPriceSource(ctx context.Context, cfg config.Config, model string) string {
	nc, err := nats.Connect(cfg.NATSURL, nats.Timeout(2*time.Second), nats.Name("herald-doctor"), app.InboxOption(cfg))
	if err != nil {
		return ""
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, bus.BucketPrices)
	if err != nil {
		return ""
	}
	imported, _, err := bus.LoadImportedPrices(ctx, kv)
	if err != nil {
		return ""
	}
	if _, src := pricing.NewTable(nil).WithImported(imported).Lookup(model); src == pricing.SourceImported {
		return src
	}
	return ""
}
