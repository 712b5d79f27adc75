package accounting

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// DefaultDatabase is used when the DSN names no database.
const DefaultDatabase = "herald"

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// parseDSN reads clickhouse://[user:pass@]host:port/database. Only the native
// protocol is used: clickhouse-go's HTTP protocol cannot talk to 18.16.
func parseDSN(dsn string) (*clickhouse.Options, error) {
	if !strings.HasPrefix(dsn, "clickhouse://") && !strings.HasPrefix(dsn, "tcp://") {
		return nil, fmt.Errorf("ClickHouse DSN %q: want clickhouse://host:port/database (native protocol)", redact(dsn))
	}
	opts, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("ClickHouse DSN %q: %w", redact(dsn), err)
	}
	if opts.Auth.Database == "" {
		opts.Auth.Database = DefaultDatabase
	}
	if !identifier.MatchString(opts.Auth.Database) {
		return nil, fmt.Errorf("ClickHouse DSN %q: database %q is not a plain identifier", redact(dsn), opts.Auth.Database)
	}
	if opts.DialTimeout == 0 || opts.DialTimeout > 5*time.Second {
		opts.DialTimeout = 3 * time.Second
	}
	return opts, nil
}

// redact hides a password in a DSN so it can be logged.
func redact(dsn string) string {
	at := strings.LastIndex(dsn, "@")
	scheme := strings.Index(dsn, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return dsn
	}
	userinfo := dsn[scheme+3 : at]
	if i := strings.Index(userinfo, ":"); i >= 0 {
		userinfo = userinfo[:i] + ":***"
	}
	return dsn[:scheme+3] + userinfo + dsn[at:]
}

// store is an open ClickHouse database.
type store struct {
	conn     driver.Conn
	addr     string
	database string
}

// openStore connects to the DSN's database, creating it when absent. The
// first connection goes to "default" since a native handshake naming a
// missing database fails.
func openStore(ctx context.Context, dsn string) (*store, error) {
	opts, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	db := opts.Auth.Database
	addr := strings.Join(opts.Addr, ",")
	admin := *opts
	admin.Auth.Database = "default"
	if err := withConn(ctx, &admin, func(c driver.Conn) error {
		return c.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+db)
	}); err != nil {
		return nil, &UnreachableError{Addr: addr, Err: err}
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return nil, &UnreachableError{Addr: addr, Err: err}
	}
	if err := conn.Ping(ctx); err != nil {
		conn.Close()
		return nil, &UnreachableError{Addr: addr, Err: err}
	}
	return &store{conn: conn, addr: addr, database: db}, nil
}

// openExisting connects to the DSN's database without creating anything.
func openExisting(ctx context.Context, dsn string) (*store, error) {
	opts, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	addr := strings.Join(opts.Addr, ",")
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return nil, &UnreachableError{Addr: addr, Err: err}
	}
	if err := conn.Ping(ctx); err != nil {
		conn.Close()
		if isMissingDatabase(err) {
			return nil, fmt.Errorf("ClickHouse at %s has no database %q yet (nothing recorded; run `herald migrate` or start accounting): %w", addr, opts.Auth.Database, err)
		}
		return nil, &UnreachableError{Addr: addr, Err: err}
	}
	return &store{conn: conn, addr: addr, database: opts.Auth.Database}, nil
}

func isMissingDatabase(err error) bool {
	var ex *clickhouse.Exception
	return errors.As(err, &ex) && ex.Code == 81
}

func withConn(ctx context.Context, opts *clickhouse.Options, f func(driver.Conn) error) error {
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.Ping(ctx); err != nil {
		return err
	}
	return f(conn)
}

func (s *store) Close() error { return s.conn.Close() }

// isServerException reports whether ClickHouse answered with an error (as
// opposed to not answering at all).
func isServerException(err error) bool {
	var ex *clickhouse.Exception
	return errors.As(err, &ex)
}
