package accounting

import (
	"context"
	"sort"
	"strings"
)

// A session's cost includes its subagents': a delegate_task child is a
// session of its own whose usage rows name the parent in parent_session_id
// (delegation is one level deep, so the parent is the root). session_roots
// (migration 004) maps each child to its root.

// rootJoin gives every usage row its root_session_id ("" for a session that
// is its own root); it follows a FROM source that yields session_id.
const rootJoin = " ANY LEFT JOIN (SELECT session_id, any(root_session_id) AS root_session_id " +
	"FROM session_roots GROUP BY session_id) USING session_id"

// rootSession is the grouping expression of a session with its subagents.
const rootSession = "if(root_session_id = '', session_id, root_session_id)"

// family is a session and the subagent sessions it delegated to, with
// where their rows are.
type family struct {
	root      string
	subagents []string // sorted
	spans     []sessionSpan
}

// sessions lists the root first, then its subagents.
func (f family) sessions() []string { return append([]string{f.root}, f.subagents...) }

// sessionFamily looks the session and its subagents up in session_spans
// (and session_roots), the busiest tenant first; no spans means no rows.
func (s *store) sessionFamily(ctx context.Context, sessionID string) (family, error) {
	f := family{root: sessionID}
	rows, err := s.conn.Query(ctx, "SELECT tenant, toUInt32(min(hour)), toUInt32(max(hour)), groupUniqArray(session_id) "+
		"FROM session_spans WHERE session_id = ? OR session_id IN "+
		"(SELECT session_id FROM session_roots WHERE root_session_id = ?) "+
		"GROUP BY tenant ORDER BY sum(calls) DESC, tenant", sessionID, sessionID)
	if err != nil {
		return f, s.queryError(err)
	}
	defer rows.Close()
	seen := map[string]bool{sessionID: true}
	for rows.Next() {
		var sp sessionSpan
		var ids []string
		if err := rows.Scan(&sp.tenant, &sp.from, &sp.to, &ids); err != nil {
			return f, err
		}
		sp.to += 3600
		f.spans = append(f.spans, sp)
		for _, id := range ids {
			if !seen[id] {
				seen[id] = true
				f.subagents = append(f.subagents, id)
			}
		}
	}
	sort.Strings(f.subagents)
	return f, s.queryError(rows.Err())
}

// sessionIn is the condition "session_id is one of ids" and its arguments.
func sessionIn(ids []string) (string, []any) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return "session_id IN (" + strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ") + ")", args
}
