package loop

import (
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/heraldrun/herald/pkg/toolspec"
)

// SegmentPlan assigns each call of one model response to an ordered segment:
// calls inside a segment run in parallel, segments run one after another.
// Read-only tools share a segment; file tools share one while no writer's
// path overlaps another call's path; clarify and calls that could not be
// parsed (barrier = true) stand alone. delegate_task calls share a segment
// with each other only, at most maxChildren of them.
func SegmentPlan(calls []PendingCall, barrier func(PendingCall) bool, maxChildren int) []int {
	segs := make([]int, len(calls))
	seg := 0
	var open []PendingCall // calls of the current segment
	for i, c := range calls {
		if barrier(c) {
			if len(open) > 0 {
				seg++
			}
			segs[i] = seg
			seg++
			open = nil
			continue
		}
		if len(open) > 0 && (conflicts(c, open) || !childrenFit(c, open, maxChildren)) {
			seg++
			open = nil
		}
		segs[i] = seg
		open = append(open, c)
	}
	return segs
}

// childrenFit reports whether c may join open as far as delegation goes:
// children run only beside children, at most maxChildren at once.
func childrenFit(c PendingCall, open []PendingCall, maxChildren int) bool {
	if (c.Tool == delegateTool) != (open[0].Tool == delegateTool) {
		return false
	}
	return c.Tool != delegateTool || len(open) < maxChildren
}

// conflicts reports whether c cannot run alongside the calls in open.
func conflicts(c PendingCall, open []PendingCall) bool {
	spec, _ := toolspec.Lookup(c.Tool)
	for _, o := range open {
		if c.Tool == delegateTool && o.Tool == delegateTool {
			continue
		}
		ospec, _ := toolspec.Lookup(o.Tool)
		if spec.ReadOnly && ospec.ReadOnly {
			continue
		}
		if spec.PathArg == "" || ospec.PathArg == "" {
			return true // an unscoped side effect orders everything around it
		}
		if pathsOverlap(argPath(c, spec.PathArg), argPath(o, ospec.PathArg)) {
			return true
		}
	}
	return false
}

func argPath(c PendingCall, key string) string {
	var m map[string]any
	_ = json.Unmarshal([]byte(c.Args), &m)
	p, _ := m[key].(string)
	return filepath.Clean("/" + p)
}

func pathsOverlap(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}
