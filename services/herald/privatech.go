package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/services/accounting"
	"github.com/rs/zerolog"
)

// A laptop's costs live in one private ClickHouse per user: the first
// `herald up` or in-process `herald run` that finds clickhouse-server
// installed and no HERALD_CLICKHOUSE_DSN starts it under its data folder,
// and records where in a per-user state file; later ones, from any folder,
// use that server while it runs, or start it again from its folder, so
// `herald cost` and `insights` see every folder's costs.

// privateCHEnv turns the private ClickHouse off for `herald run` and `chat`
// ("off"), e.g. where a start of a few seconds per run is not wanted.
const privateCHEnv = "HERALD_PRIVATE_CLICKHOUSE"

// chRecord is the per-user record of the private ClickHouse.
type chRecord struct {
	DSN string `json:"dsn"`
	Dir string `json:"dir"` // its data folder (clickhouse-server's config is in it)
}

// chRecordPath is $XDG_STATE_HOME/herald/clickhouse.json, by default
// ~/.local/state/herald/clickhouse.json.
func chRecordPath() string {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "herald", "clickhouse.json")
}

func readCHRecord() chRecord {
	var r chRecord
	if p := chRecordPath(); p != "" {
		if data, err := os.ReadFile(p); err == nil {
			_ = json.Unmarshal(data, &r)
		}
	}
	return r
}

func writeCHRecord(r chRecord) {
	p := chRecordPath()
	if p == "" || os.MkdirAll(filepath.Dir(p), 0o700) != nil {
		return
	}
	data, _ := json.Marshal(r)
	tmp := p + ".tmp"
	if os.WriteFile(tmp, data, 0o600) == nil {
		_ = os.Rename(tmp, p)
	}
}

// chAnswers reports whether a ClickHouse listens where dsn points.
func chAnswers(dsn string) bool {
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		return false
	}
	conn, err := net.DialTimeout("tcp", u.Host, 300*time.Millisecond)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// runningPrivateCH is the DSN of a private ClickHouse that runs now: the
// data folder's (herald up here), else the user's.
func runningPrivateCH(dataDir string) string {
	if data, err := os.ReadFile(filepath.Join(dataDir, dsnFile)); err == nil {
		if dsn := string(trimSpace(data)); chAnswers(dsn) {
			return dsn
		}
	}
	if r := readCHRecord(); r.DSN != "" && chAnswers(r.DSN) {
		return r.DSN
	}
	return ""
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// sharedClickHouse sets *dsn to the user's private ClickHouse, starting it
// (under the folder it used before, else dataDir/clickhouse) when none
// runs. The returned server is nil when someone else's was found, or none
// can run; the caller stops a server it got.
func sharedClickHouse(ctx context.Context, dsn *string, dataDir string, log zerolog.Logger) (*accounting.LocalClickHouse, error) {
	if *dsn != "" {
		return nil, nil
	}
	if running := runningPrivateCH(dataDir); running != "" {
		*dsn = running
		log.Info().Str("clickhouse", running).Msg("using the private ClickHouse that runs")
		return nil, nil
	}
	if _, err := exec.LookPath("clickhouse-server"); err != nil {
		return nil, accounting.ErrNoClickHouse
	}
	dir := filepath.Join(dataDir, "clickhouse")
	if r := readCHRecord(); dirExists(r.Dir) { // a deleted folder is not recreated: start fresh here
		dir = r.Dir
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	l, err := accounting.StartLocalClickHouse(ctx, abs, log)
	if err != nil {
		// Another process may have started the same server meanwhile.
		if running := runningPrivateCH(dataDir); running != "" {
			*dsn = running
			return nil, nil
		}
		return nil, err
	}
	*dsn = l.DSN()
	writeCHRecord(chRecord{DSN: *dsn, Dir: abs})
	return l, nil
}

// laptopClickHouse gives an in-process `herald run` or `chat` the ClickHouse
// `herald up` would use; it returns what stops a server it started.
func laptopClickHouse(ctx context.Context, cfg *config.Config, log zerolog.Logger) func() {
	if os.Getenv(privateCHEnv) == "off" {
		return func() {}
	}
	l, err := sharedClickHouse(ctx, &cfg.ClickHouseDSN, cfg.DataDir, log)
	if err != nil {
		if !errors.Is(err, accounting.ErrNoClickHouse) {
			log.Warn().Err(err).Msg("private ClickHouse did not start: usage waits in the USAGE stream")
		}
		return func() {}
	}
	if l == nil {
		return func() {}
	}
	return l.Stop
}

// errNoCostStore says where costs could be read from, with the exact line
// to set.
var errNoCostStore = errors.New("no ClickHouse found: set HERALD_CLICKHOUSE_DSN, e.g.\n" +
	"  export HERALD_CLICKHOUSE_DSN=clickhouse://127.0.0.1:9000/herald\n" +
	"or install clickhouse-server: herald run and herald up then keep every folder's costs in a private one " +
	"(recorded in " + chRecordPathShown() + ")")

func chRecordPathShown() string {
	if p := chRecordPath(); p != "" {
		return p
	}
	return "$XDG_STATE_HOME/herald/clickhouse.json"
}

// costStore is the ClickHouse herald cost and insights read: the configured
// one, else the private one (started for the query when it is not
// running). stop ends a server started for the query.
func costStore(ctx context.Context, cfg config.Config, log zerolog.Logger) (dsn string, stop func(), err error) {
	if dsn = clickHouseDSN(cfg); dsn != "" && (cfg.ClickHouseDSN != "" || chAnswers(dsn)) {
		return dsn, func() {}, nil
	}
	if running := runningPrivateCH(cfg.DataDir); running != "" {
		return running, func() {}, nil
	}
	r, err := recordedCH()
	if err != nil {
		return "", nil, err
	}
	l, err := accounting.StartLocalClickHouse(ctx, r.Dir, log)
	if err != nil {
		return "", nil, fmt.Errorf("start the private ClickHouse in %s: %w", r.Dir, err)
	}
	writeCHRecord(chRecord{DSN: l.DSN(), Dir: r.Dir})
	return l.DSN(), l.Stop, nil
}

// errNoCostsYet says clickhouse-server is installed and no private
// ClickHouse has kept costs for this user yet.
var errNoCostsYet = errors.New("no costs recorded yet: the first herald run or herald up starts a private ClickHouse " +
	"(clickhouse-server is installed) and records it in " + chRecordPathShown() +
	"; or set HERALD_CLICKHOUSE_DSN to read another ClickHouse")

// recordedCH is the user's private ClickHouse to start for a query. A
// recorded folder that no longer exists is never started empty in its
// place (a query would find no database, and the next run would keep its
// costs where they were lost once already).
func recordedCH() (chRecord, error) {
	r := readCHRecord()
	_, lookErr := exec.LookPath("clickhouse-server")
	switch {
	case r.Dir == "" && lookErr == nil:
		return r, errNoCostsYet
	case r.Dir == "":
		return r, errNoCostStore
	case !dirExists(r.Dir):
		return r, fmt.Errorf("the private ClickHouse recorded in %s kept its data in %s, which no longer exists: "+
			"its costs are gone; the next herald run or herald up starts a fresh one under its data folder", chRecordPathShown(), r.Dir)
	case lookErr != nil:
		return r, fmt.Errorf("the private ClickHouse in %s needs clickhouse-server, which is not on PATH: %w", r.Dir, errNoCostStore)
	}
	return r, nil
}

func dirExists(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.IsDir()
}

// privateCHCheck is doctor's word where no ClickHouse runs but
// clickhouse-server is installed: nothing to install, one starts with the
// next herald run or up.
func privateCHCheck() (check, bool) {
	if _, err := exec.LookPath("clickhouse-server"); err != nil {
		return check{}, false
	}
	detail := "clickhouse-server is installed; no private ClickHouse runs now: herald up and herald run start one"
	if r := readCHRecord(); dirExists(r.Dir) {
		detail += " (its data: " + r.Dir + "; herald cost starts it to read)"
	}
	return check{Name: "clickhouse", Status: checkOK, Detail: detail}, true
}
