package accounting

import (
	"context"
	"fmt"
)

// SchemaStatus is what `herald doctor` reports of a ClickHouse database.
type SchemaStatus struct {
	Server  string // the server's version
	Applied int    // highest migration applied (0: none)
	Latest  int    // highest migration this binary knows
}

// QuerySchemaStatus connects to dsn without creating anything and reads
// which migrations its database holds.
func QuerySchemaStatus(ctx context.Context, dsn string) (SchemaStatus, error) {
	if dsn == "" {
		return SchemaStatus{}, ErrNoDSN
	}
	all, err := migrations()
	if err != nil {
		return SchemaStatus{}, err
	}
	var s SchemaStatus
	for _, m := range all {
		s.Latest = max(s.Latest, m.version)
	}
	st, err := openExisting(ctx, dsn)
	if err != nil {
		return s, err
	}
	defer st.Close()
	if v, err := st.conn.ServerVersion(); err == nil {
		s.Server = fmt.Sprintf("%d.%d.%d", v.Version.Major, v.Version.Minor, v.Version.Patch)
	}
	var exists uint8
	if err := st.conn.QueryRow(ctx, "EXISTS TABLE schema_migrations").Scan(&exists); err != nil {
		return s, fmt.Errorf("read migrations ledger: %w", err)
	}
	if exists == 0 {
		return s, nil
	}
	done, err := st.appliedVersions(ctx)
	if err != nil {
		return s, err
	}
	for v := range done {
		s.Applied = max(s.Applied, v)
	}
	return s, nil
}
