package accounting

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"

	"github.com/rs/zerolog"
)

// TestDSNEnv names a ClickHouse that tests use instead of starting their own
// (CI starts one server and sets it, e.g. clickhouse://127.0.0.1:9000/).
const TestDSNEnv = "HERALD_TEST_CLICKHOUSE_DSN"

// EnsureTestClickHouse gives a test binary a ClickHouse: the server named by
// HERALD_TEST_CLICKHOUSE_DSN when set, else a private server with its data
// under dir. The DSN names a fresh database of its own; stop drops it (or
// stops the private server).
func EnsureTestClickHouse(ctx context.Context, dir string) (dsn string, stop func(), err error) {
	if base := os.Getenv(TestDSNEnv); base != "" {
		return FreshDatabase(ctx, base)
	}
	local, err := StartLocalClickHouse(ctx, dir, zerolog.Nop())
	if err != nil {
		return "", nil, err
	}
	dsn, drop, err := FreshDatabase(ctx, local.DSN())
	if err != nil {
		local.Stop()
		return "", nil, err
	}
	return dsn, func() { drop(); local.Stop() }, nil
}

// FreshDatabase returns base with its database replaced by a new, uniquely
// named one, and a func that drops it. Tests sharing one server stay apart.
func FreshDatabase(ctx context.Context, base string) (dsn string, drop func(), err error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, fmt.Errorf("test ClickHouse DSN: %w", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	u.Path = "/herald_test_" + hex.EncodeToString(b[:])
	dsn = u.String()
	st, err := openStore(ctx, dsn)
	if err != nil {
		return "", nil, err
	}
	return dsn, func() {
		_ = st.conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+st.database)
		st.Close()
	}, nil
}
