package accounting

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one versioned schema change; its statements are idempotent
// (IF NOT EXISTS, a backfill whose repeat changes nothing, or an ADD COLUMN
// whose column already being there counts as done) so two processes
// migrating at once cannot break anything.
type migration struct {
	version    int
	name       string
	statements []string
}

// Migrate creates the DSN's database and applies every migration it has not
// recorded yet. It is what Start runs and what `herald migrate` calls; it
// returns the versions it applied.
func Migrate(ctx context.Context, dsn string) ([]int, error) {
	st, err := openStore(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return st.migrate(ctx)
}

func (s *store) migrate(ctx context.Context) ([]int, error) { return s.migrateUpTo(ctx, math.MaxInt) }

// migrateUpTo applies the versions up to last; tests use it to build a
// database as an older release left it.
func (s *store) migrateUpTo(ctx context.Context, last int) ([]int, error) {
	const ledger = `CREATE TABLE IF NOT EXISTS schema_migrations (
		version UInt32, name String, applied_at DateTime DEFAULT now()
	) ENGINE = ReplacingMergeTree() ORDER BY version`
	if err := s.conn.Exec(ctx, ledger); err != nil {
		return nil, fmt.Errorf("migrations ledger: %w", err)
	}
	done, err := s.appliedVersions(ctx)
	if err != nil {
		return nil, err
	}
	all, err := migrations()
	if err != nil {
		return nil, err
	}
	var applied []int
	for _, m := range all {
		if done[m.version] || m.version > last {
			continue
		}
		for _, stmt := range m.statements {
			if err := s.conn.Exec(ctx, stmt); err != nil && !columnExists(stmt, err) {
				return applied, fmt.Errorf("migration %03d_%s: %w", m.version, m.name, err)
			}
		}
		if err := s.conn.Exec(ctx, "INSERT INTO schema_migrations (version, name) SELECT toUInt32(?), ?", m.version, m.name); err != nil {
			return applied, fmt.Errorf("record migration %d: %w", m.version, err)
		}
		applied = append(applied, m.version)
	}
	return applied, nil
}

// columnExists: stmt adds a column and ClickHouse refused it because the
// column is already there (code 44): another process applied it first.
func columnExists(stmt string, err error) bool {
	var ex *clickhouse.Exception
	return strings.HasPrefix(stmt, "ALTER TABLE ") && strings.Contains(stmt, " ADD COLUMN ") &&
		errors.As(err, &ex) && ex.Code == 44 && strings.Contains(ex.Message, "already exists")
}

func (s *store) appliedVersions(ctx context.Context) (map[int]bool, error) {
	rows, err := s.conn.Query(ctx, "SELECT DISTINCT version FROM schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations ledger: %w", err)
	}
	defer rows.Close()
	done := map[int]bool{}
	for rows.Next() {
		var v uint32
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		done[int(v)] = true
	}
	return done, rows.Err()
}

// migrations reads the embedded files NNN_name.sql in version order.
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]migration, 0, len(names))
	for _, path := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(path, "migrations/"), ".sql")
		num, name, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration file %s: want NNN_name.sql", path)
		}
		text, err := migrationFiles.ReadFile(path)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: name, statements: splitStatements(string(text))})
	}
	return out, nil
}

// splitStatements drops -- comment lines and splits on ';' at line ends; the
// native protocol takes one statement per query.
func splitStatements(text string) []string {
	var b strings.Builder
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	var out []string
	for _, stmt := range strings.Split(b.String(), ";\n") {
		if stmt = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(stmt), ";")); stmt != "" {
			out = append(out, stmt)
		}
	}
	return out
}
