package accounting

import (
	"context"
	"fmt"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// insertNew stores the rows whose ids ClickHouse does not hold yet and
// returns how many it stored. Asking first is what keeps a redelivered batch
// (the sink died between insert and ack) from being counted twice by the
// roll-up views, which sum every inserted row; ReplacingMergeTree alone would
// only collapse the raw table.
func (s *store) insertNew(ctx context.Context, k eventKind, rows []row) (int, error) {
	rows = uniqueRows(rows)
	stored, err := s.storedIDs(ctx, k, rows)
	if err != nil {
		return 0, err
	}
	fresh := rows[:0:0]
	for _, r := range rows {
		if !stored[r.id] {
			fresh = append(fresh, r)
		}
	}
	if len(fresh) == 0 {
		return 0, nil
	}
	if c := k.companion; c != nil {
		if err := s.insertDerived(ctx, c, fresh); err != nil {
			return 0, err
		}
	}
	if err := s.insertColumns(ctx, k.table, k.columns, len(fresh), k.toColumns(fresh)); err != nil {
		return 0, err
	}
	return len(fresh), nil
}

// insertColumns stores n rows laid out as one slice per column.
func (s *store) insertColumns(ctx context.Context, table string, columns []string, n int, cols []any) error {
	batch, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+table+" ("+strings.Join(columns, ", ")+")")
	if err != nil {
		return fmt.Errorf("prepare insert into %s: %w", table, err)
	}
	defer batch.Abort()
	for i, col := range cols {
		if err := batch.Column(i).Append(col); err != nil {
			return fmt.Errorf("append column %s of %s: %w", columns[i], table, err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("insert %d rows into %s: %w", n, table, err)
	}
	return nil
}

// storedIDs returns which of the rows' ids are already in ClickHouse.
func (s *store) storedIDs(ctx context.Context, k eventKind, rows []row) (map[string]bool, error) {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.id
	}
	// A batch of ids can exceed the default 256 KiB query size.
	ctx = clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"max_query_size": 64 << 20}))
	res, err := s.conn.Query(ctx, "SELECT DISTINCT event_id FROM "+k.idTable+" WHERE event_id IN (SELECT arrayJoin(?))", ids)
	if err != nil {
		return nil, fmt.Errorf("look up stored ids in %s: %w", k.idTable, err)
	}
	defer res.Close()
	stored := make(map[string]bool)
	for res.Next() {
		var id string
		if err := res.Scan(&id); err != nil {
			return nil, err
		}
		stored[id] = true
	}
	return stored, res.Err()
}

// uniqueRows keeps the first row of each id.
func uniqueRows(rows []row) []row {
	seen := make(map[string]bool, len(rows))
	out := rows[:0:0]
	for _, r := range rows {
		if !seen[r.id] {
			seen[r.id] = true
			out = append(out, r)
		}
	}
	return out
}
