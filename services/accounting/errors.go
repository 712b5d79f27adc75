package accounting

import (
	"errors"
	"fmt"
)

var (
	// ErrNoClickHouse: clickhouse-server is not on PATH.
	ErrNoClickHouse = errors.New("clickhouse-server is not on PATH")
	// ErrNoDSN: a query was asked of ClickHouse but none is configured.
	ErrNoDSN = errors.New("no ClickHouse configured (set HERALD_CLICKHOUSE_DSN, e.g. clickhouse://127.0.0.1:9000/herald); usage events wait in the USAGE stream")
	// ErrUnreachable matches every UnreachableError.
	ErrUnreachable = errors.New("ClickHouse is not reachable")
	// ErrBadQuery: a CostQuery asks for something that does not exist.
	ErrBadQuery = errors.New("bad cost query")
)

// UnreachableError says which ClickHouse could not be reached and why.
type UnreachableError struct {
	Addr string
	Err  error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("ClickHouse at %s is not reachable: %v; usage events wait in the USAGE stream", e.Addr, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnreachable) true.
func (e *UnreachableError) Is(target error) bool { return target == ErrUnreachable }
