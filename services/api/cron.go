package api

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// cronSpec is a five-field cron expression (minute hour day-of-month month
// day-of-week), read to tell when a schedule fires next; JetStream fires it.
type cronSpec struct {
	fields [5]map[int]bool
}

var cronRanges = [5][2]int{{0, 59}, {0, 23}, {1, 31}, {1, 12}, {0, 6}}

func parseCron(expr string) (cronSpec, error) {
	parts := strings.Fields(expr)
	if len(parts) != 5 {
		return cronSpec{}, fmt.Errorf("cron %q: want five fields (minute hour day-of-month month day-of-week)", expr)
	}
	var c cronSpec
	for i, p := range parts {
		set, err := cronField(p, cronRanges[i][0], cronRanges[i][1])
		if err != nil {
			return cronSpec{}, fmt.Errorf("cron %q field %d: %w", expr, i+1, err)
		}
		c.fields[i] = set
	}
	return c, nil
}

func cronField(p string, lo, hi int) (map[int]bool, error) {
	set := map[int]bool{}
	for _, item := range strings.Split(p, ",") {
		rng, stepText, hasStep := strings.Cut(item, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepText)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("bad step %q", stepText)
			}
			step = n
		}
		from, to := lo, hi
		if rng != "*" {
			a, b, isRange := strings.Cut(rng, "-")
			var err error
			if from, err = strconv.Atoi(a); err != nil {
				return nil, fmt.Errorf("bad value %q", a)
			}
			to = from
			if isRange {
				if to, err = strconv.Atoi(b); err != nil {
					return nil, fmt.Errorf("bad value %q", b)
				}
			} else if hasStep {
				to = hi
			}
		}
		if hi == 6 && to == 7 { // Sunday as 7
			to = 6
			set[0] = true
		}
		if from < lo || to > hi || from > to {
			return nil, fmt.Errorf("%q is outside %d-%d", item, lo, hi)
		}
		for v := from; v <= to; v += step {
			set[v] = true
		}
	}
	return set, nil
}

// next is the first minute after t the expression matches, in t's zone.
func (c cronSpec) next(t time.Time) (time.Time, bool) {
	t = t.Truncate(time.Minute).Add(time.Minute)
	for limit := t.AddDate(5, 0, 0); t.Before(limit); t = t.Add(time.Minute) {
		if c.fields[3][int(t.Month())] && c.fields[2][t.Day()] && c.fields[4][int(t.Weekday())] &&
			c.fields[1][t.Hour()] && c.fields[0][t.Minute()] {
			return t, true
		}
	}
	return time.Time{}, false
}
