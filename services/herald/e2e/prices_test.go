package e2e

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/accounting"
	"github.com/heraldrun/herald/services/herald/internal/app"
	"github.com/stretchr/testify/require"
)

// GenAIPricesEnv names the folder of the npm package @pydantic/genai-prices
// (node_modules/@pydantic/genai-prices), whose bundled catalogue the price
// import test reads: .ci/run installs it.
const GenAIPricesEnv = "HERALD_TEST_GENAI_PRICES"

// genaiPricesVersion is the release of @pydantic/genai-prices the test
// installs when GenAIPricesEnv is not set (.ci/run pins the same).
const genaiPricesVersion = "0.1.8"

// genaiPricesPackage finds the npm package: $HERALD_TEST_GENAI_PRICES, else
// the pinned release installed with npm into the user's cache, so the test
// runs or fails saying why, never skips.
func genaiPricesPackage(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv(GenAIPricesEnv); dir != "" {
		require.DirExists(t, dir, "%s names no folder", GenAIPricesEnv)
		return dir
	}
	require.Empty(t, os.Getenv("CI"), "%s is not set: .ci/run installs @pydantic/genai-prices with npm", GenAIPricesEnv)
	cache, err := os.UserCacheDir()
	require.NoError(t, err)
	prefix := filepath.Join(cache, "herald-test", "genai-prices-"+genaiPricesVersion)
	dir := filepath.Join(prefix, "node_modules", "@pydantic", "genai-prices")
	if _, err := os.Stat(filepath.Join(dir, "package.json")); err == nil {
		return dir
	}
	out, err := exec.Command("npm", "install", "--prefix", prefix, "--no-audit", "--no-fund",
		"@pydantic/genai-prices@"+genaiPricesVersion).CombinedOutput()
	require.NoError(t, err, "installing @pydantic/genai-prices with npm (set %s to skip this): %s", GenAIPricesEnv, out)
	return dir
}

// genaiCatalogue writes the npm package's bundled catalogue as genai-prices'
// data.json, as docs/COSTS.md tells users to.
func genaiCatalogue(t *testing.T) (string, []byte) {
	dir := genaiPricesPackage(t)
	_, here, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(here), "..", "..", "..", "scripts", "genai-prices-data.mjs")
	out, err := exec.Command("node", script, dir).Output()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "genai-prices.json")
	require.NoError(t, os.WriteFile(path, out, 0o644))
	return path, out
}

// catalogueMtok reads one model's input and output price (USD per million
// tokens) straight from the catalogue's JSON, apart from Herald's reader.
func catalogueMtok(t *testing.T, data []byte, provider, model string) (in, out float64) {
	// models with dated or tiered prices do not decode here; command-r has
	// neither
	dec := json.NewDecoder(strings.NewReader(string(data)))
	var raw []json.RawMessage
	require.NoError(t, dec.Decode(&raw))
	for _, p := range raw {
		var one struct {
			ID     string            `json:"id"`
			Models []json.RawMessage `json:"models"`
		}
		require.NoError(t, json.Unmarshal(p, &one))
		if one.ID != provider {
			continue
		}
		for _, m := range one.Models {
			var mm struct {
				ID     string             `json:"id"`
				Prices map[string]float64 `json:"prices"`
			}
			if json.Unmarshal(m, &mm) == nil && mm.ID == model {
				return mm.Prices["input_mtok"], mm.Prices["output_mtok"]
			}
		}
	}
	t.Fatalf("%s:%s not in the catalogue", provider, model)
	return 0, 0
}

// A real catalogue (genai-prices, from its npm package) imported with the
// CLI while Herald runs: the running gateway prices its next calls with it
// (no restart), the operator's herald.yaml price is kept and reported,
// `herald cost reprice` prices the call made before the import, and the
// month's export adds up to herald cost.
func TestImportedCatalogueIsInForceWithoutARestartAndRepricesThePast(t *testing.T) {
	path, data := genaiCatalogue(t)
	inMtok, outMtok := catalogueMtok(t, data, "cohere", "command-r")
	require.Positive(t, inMtok)

	h := Start(t, func(r *scripted.Request) scripted.Reply { return scripted.Text("done") }, WithClickHouse(t),
		WithConfig(func(c *config.Config) {
			c.Primary.Model = "command-r" // in the catalogue, not in Herald's built-in list
			c.Pricing = map[string]config.Price{"gpt-4o": {Input: 9, Output: 9}}
		}), func(_ *config.Config, o *app.Options) { o.Listen = "127.0.0.1:0" })
	dir := t.TempDir()
	yaml := filepath.Join(dir, "herald.yaml")
	require.NoError(t, os.WriteFile(yaml, []byte("pricing:\n  gpt-4o: {input: 9, output: 9}\n"), 0o644))
	env := map[string]string{"HERALD_NATS_URL": h.App.Server.ClientURL(), "HERALD_CONFIG": yaml,
		"HERALD_CLICKHOUSE_DSN": h.Config.ClickHouseDSN, "HERALD_DATA_DIR": filepath.Join(dir, "data")}

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`"not a catalogue"`), 0o644))
	out, code := runHerald(t, env, "prices", "import", bad)
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "not a price catalogue")
	require.NoError(t, os.WriteFile(bad, []byte(`[{"id": "x", "models": [{"id": "m", "prices": {"input_mtok": -1}}]}]`), 0o644))
	out, code = runHerald(t, env, "prices", "import", bad)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "0 models added", "a negative price is not imported")
	require.Contains(t, out, "x:m: price input_mtok is negative")

	before := h.Run(NewTask("before the import"))
	require.Equal(t, proto.CostUnknown, before.CostStatus, "command-r has no price yet")

	out, code = runHerald(t, env, "prices", "import", path)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "(genai-prices): ")
	require.Contains(t, out, "kept from herald.yaml")
	require.Contains(t, out, "  gpt-4o: herald.yaml input 9, output 9; catalogue input ")

	// the catalogue's dated prices are dated entries, its tiers tiers
	out, code = runHerald(t, env, "prices", "list", "--json")
	require.Equal(t, 0, code, out)
	var listed []struct {
		Model, Source, Since string
		Price                struct{ Tiers []json.RawMessage }
	}
	require.NoError(t, json.Unmarshal([]byte(out), &listed))
	var opus []string
	tiered := 0
	for _, r := range listed {
		if r.Model == "claude-opus-4-6" {
			opus = append(opus, r.Source+"@"+r.Since)
		}
		if len(r.Price.Tiers) > 0 {
			tiered++
		}
	}
	require.Equal(t, []string{"imported:genai-prices@", "imported:genai-prices@2026-03-13"}, opus,
		"claude-opus-4-6's price from 2026-03-13 (a start_date constraint in the catalogue)")
	require.Positive(t, tiered)

	// doctor knows the imported price too
	doctorEnv := map[string]string{"HERALD_BASE_URL": h.Model.URL, "HERALD_MODEL": "command-r", "HERALD_PROVIDER": "openai"}
	for k, v := range env {
		doctorEnv[k] = v
	}
	out, _ = runHerald(t, doctorEnv, "doctor")
	require.Contains(t, out, "price imported", out)
	require.NotContains(t, out, "no price known for command-r")

	// the running gateway: its next calls are priced by the catalogue
	var after proto.Result
	require.Eventually(t, func() bool {
		after = h.Run(NewTask("after the import"))
		return after.CostStatus == proto.CostExact
	}, 20*time.Second, 50*time.Millisecond)
	want := uint64(float64(after.Usage.InputTokens)*inMtok*1000 + float64(after.Usage.OutputTokens)*outMtok*1000 + 0.5)
	require.InDelta(t, float64(want)/1e9, after.CostUSD, 1e-12)

	ctx := context.Background()
	dsn := h.Config.ClickHouseDSN
	var month string
	require.Eventually(t, func() bool {
		rep, err := accounting.QueryCost(ctx, dsn, accounting.CostQuery{By: "tenant"})
		if err != nil || len(rep.Rows) != 1 || rep.Total.Calls < 2 {
			return false
		}
		month = time.Now().UTC().Format("2006-01")
		return rep.Total.UnpricedCalls == 1
	}, 20*time.Second, 50*time.Millisecond)
	tenant := func() string {
		rep, err := accounting.QueryCost(ctx, dsn, accounting.CostQuery{By: "tenant"})
		require.NoError(t, err)
		return rep.Rows[0].Key
	}()

	// one reprice at a time: a lease held elsewhere refuses a second
	leases, err := h.JS.KeyValue(ctx, bus.BucketAccounting)
	require.NoError(t, err)
	_, err = leases.Create(ctx, "reprice", []byte("another process"))
	require.NoError(t, err)
	out, code = runHerald(t, env, "cost", "reprice", "--model", "command-r")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "another herald cost reprice is running")
	require.NoError(t, leases.Delete(ctx, "reprice"))

	out, code = runHerald(t, env, "cost", "reprice", "--model", "command-r")
	require.Equal(t, 0, code, out)
	require.Regexp(t, `\d+ usage rows read; 1 corrected \(1 had no price\)`, out)
	rep, err := accounting.QueryCost(ctx, dsn, accounting.CostQuery{Tenant: tenant, Month: month})
	require.NoError(t, err)
	require.Zero(t, rep.Total.UnpricedCalls, "the call made before the import is priced now")
	wantAll := uint64(float64(rep.Total.InputTokens)*inMtok*1000 + float64(rep.Total.OutputTokens)*outMtok*1000 + 0.5)
	require.InDelta(t, wantAll, rep.Total.CostNanoUSD, float64(rep.Total.Calls), "every call at the catalogue's price (rounded once per call)")

	out, code = runHerald(t, env, "cost", "corrections", "--json")
	require.Equal(t, 0, code, out)
	var audit []accounting.Correction
	require.NoError(t, json.Unmarshal([]byte(out), &audit))
	require.Len(t, audit, 1)
	require.Equal(t, "unknown", audit[0].PriceSourceBefore)
	require.Equal(t, "imported", audit[0].PriceSourceAfter)
	require.Equal(t, "herald cost reprice", audit[0].Reason)

	out, code = runHerald(t, env, "cost", "reprice")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "none changed", "a second run changes nothing")

	out, code = runHerald(t, env, "cost", "export", "--tenant", tenant, "--month", month, "--by", "day")
	require.Equal(t, 0, code, out)
	records, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	require.NoError(t, err)
	require.Equal(t, "day", records[0][0])
	var nano uint64
	for _, r := range records[1:] {
		n, err := strconv.ParseUint(r[9], 10, 64)
		require.NoError(t, err)
		nano += n
	}
	require.Equal(t, rep.Total.CostNanoUSD, nano)
	for _, bad := range [][]string{{"--month", month}, {"--tenant", tenant, "--month", "last"}, {"--tenant", tenant, "--month", month, "--format", "xml"},
		{"--tenant", tenant, "--month", month, "--by", "provider"}} {
		out, code = runHerald(t, env, append([]string{"cost", "export"}, bad...)...)
		require.Equal(t, 2, code, "%v: %s", bad, out)
	}
	out, code = runHerald(t, env, "cost", "--tenant", tenant, "--month", month, "--json")
	require.Equal(t, 0, code, out)
	var cli accounting.CostReport
	require.NoError(t, json.Unmarshal([]byte(out), &cli))
	require.Equal(t, rep.Total.CostNanoUSD, cli.Total.CostNanoUSD)
}
