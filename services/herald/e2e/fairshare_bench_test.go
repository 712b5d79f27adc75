package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// fairModel answers every request after 200 ms, noting when it first heard
// of each prompt prefix and how many calls it served of each.
type fairModel struct {
	mu      sync.Mutex
	first   map[string]time.Time
	served  map[string]int
	order   []string
	tenants []string
}

func newFairModel(tenants ...string) *fairModel {
	return &fairModel{first: map[string]time.Time{}, served: map[string]int{}, tenants: tenants}
}

func (m *fairModel) script(r *scripted.Request) scripted.Reply {
	prompt := r.FirstUser()
	m.mu.Lock()
	if _, ok := m.first[prompt]; !ok {
		m.first[prompt] = time.Now()
	}
	for _, t := range m.tenants {
		if strings.HasPrefix(prompt, t+" ") {
			m.served[t]++
			m.order = append(m.order, t)
		}
	}
	m.mu.Unlock()
	return scripted.Reply{Content: "done", Delay: 200 * time.Millisecond}
}

func (m *fairModel) firstCall(prompt string) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.first[prompt]
}

// resultCounter counts results as they are published, by prompt prefix
// (the task id carries it), and notes when one task's came.
type resultCounter struct {
	mu    sync.Mutex
	count map[string]int
	at    map[string]time.Time
}

func countResults(b testing.TB, h *H) *resultCounter {
	rc := &resultCounter{count: map[string]int{}, at: map[string]time.Time{}}
	sub, err := h.NC.Subscribe("herald.session.*.result", func(m *nats.Msg) {
		var res proto.Result
		if json.Unmarshal(m.Data, &res) != nil {
			return
		}
		prefix, _, _ := strings.Cut(res.TaskID, "-")
		rc.mu.Lock()
		if _, seen := rc.at[res.TaskID]; !seen {
			rc.at[res.TaskID] = time.Now()
			rc.count[prefix]++
		}
		rc.mu.Unlock()
	})
	require.NoError(b, err)
	b.Cleanup(func() { _ = sub.Unsubscribe() })
	return rc
}

func (rc *resultCounter) of(prefix string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.count[prefix]
}

func (rc *resultCounter) when(taskID string) time.Time {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.at[taskID]
}

// answeredBefore is how many tasks whose ids start with prefix+"-" had
// their results before taskID's.
func (rc *resultCounter) answeredBefore(prefix, taskID string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for id, at := range rc.at {
		if strings.HasPrefix(id, prefix+"-") && at.Before(rc.at[taskID]) {
			n++
		}
	}
	return n
}

// publishAll publishes tasks of tenant (prompts "<tenant> <i>", task ids
// "<prefix>-<i>") as fast as the bus stores them.
func publishAll(b testing.TB, h *H, tenant, prefix string, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	batch := bus.NewBatch(h.JS)
	for i := range n {
		task := proto.Task{Prompt: fmt.Sprintf("%s %d", tenant, i), SessionID: fmt.Sprintf("s%s-%d", prefix, i), TaskID: fmt.Sprintf("%s-%d", prefix, i)}
		batch.JSON(ctx, bus.TenantTasks(tenant), "", task)
	}
	require.NoError(b, batch.Wait(ctx))
}

// BenchmarkFairShareFlood: tenant acme publishes 1,000 tasks (one 200 ms
// model call each), then tenant globex one. globex's time to its first
// model call and to its result, and acme's total, beside globex alone and
// beside globex's task queued behind acme's as first come, first served
// does (published on acme's own subject: the same queue). One flood a run:
// a flood's system stays up until the benchmark ends, so a second would run
// beside the first's; -count gives more runs.
func BenchmarkFairShareFlood(b *testing.B) {
	const flood = 1000
	for _, c := range []struct {
		name    string
		flood   bool
		subject string // the tenant whose queue globex's task joins
	}{
		{"globex-alone", false, "globex"},
		{"flood-same-queue-as-fifo", true, "acme"},
		{"flood-fair-share", true, "globex"},
	} {
		b.Run(c.name, func(b *testing.B) {
			if b.N > 1 {
				b.Fatalf("one flood a run (-benchtime 1x), not %d; -count N for more runs", b.N)
			}
			model := newFairModel()
			h := Start(b, model.script)
			h.StopEventLog()
			results := countResults(b, h)
			var startedAt atomic.Int64 // the turn's first event: the loop took the task
			sub, err := h.NC.Subscribe(bus.SessionEvents("s-globex"), func(*nats.Msg) {
				startedAt.CompareAndSwap(0, time.Now().UnixNano())
			})
			require.NoError(b, err)
			defer func() { _ = sub.Unsubscribe() }()
			start := time.Now()
			if c.flood {
				publishAll(b, h, "acme", "a", flood)
			}
			published := time.Now()
			task := proto.Task{Prompt: "globex task", SessionID: "s-globex", TaskID: "g-0"}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			require.NoError(b, bus.PublishJSON(ctx, h.JS, bus.TenantTasks(c.subject), "", task))
			cancel()
			require.Eventually(b, func() bool { return !results.when("g-0").IsZero() }, 5*time.Minute, time.Millisecond)
			b.ReportMetric(float64(time.Unix(0, startedAt.Load()).Sub(published).Milliseconds()), "globex-started-ms")
			b.ReportMetric(float64(model.firstCall("globex task").Sub(published).Milliseconds()), "globex-first-call-ms")
			b.ReportMetric(float64(results.when("g-0").Sub(published).Milliseconds()), "globex-result-ms")
			if c.flood {
				require.Eventually(b, func() bool { return results.of("a") == flood }, 5*time.Minute, 5*time.Millisecond)
				b.ReportMetric(time.Since(start).Seconds(), "acme-total-s")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkFairShareWeights: acme (weight 3) and globex (weight 1) each
// publish 400 tasks; of the model calls served while both still wait
// (calls 101 to 400: the first hundred follow which tenant's tasks the
// bus stored first), acme's share beside the 75 % its weight gives it (and
// beside equal weights, 50 %).
func BenchmarkFairShareWeights(b *testing.B) {
	for _, acmeWeight := range []int{1, 3} {
		b.Run(fmt.Sprintf("acme-weight-%d", acmeWeight), func(b *testing.B) {
			for range b.N {
				model := newFairModel("acme", "globex")
				h := Start(b, model.script, WithConfig(func(c *config.Config) {
					c.Tenants = map[string]config.TenantLimits{"acme": {Weight: acmeWeight}}
				}))
				h.StopEventLog()
				results := countResults(b, h)
				var wg sync.WaitGroup
				for _, t := range []string{"acme", "globex"} {
					wg.Go(func() { publishAll(b, h, t, t[:1], 400) })
				}
				wg.Wait()
				// while both wait: acme's 400 last past the 500th call
				require.Eventually(b, func() bool {
					model.mu.Lock()
					defer model.mu.Unlock()
					return len(model.order) >= 400
				}, 5*time.Minute, 5*time.Millisecond)
				model.mu.Lock()
				acme := 0
				for _, t := range model.order[100:400] {
					if t == "acme" {
						acme++
					}
				}
				model.mu.Unlock()
				b.ReportMetric(100*float64(acme)/300, "acme-%-of-calls")
				b.ReportMetric(100*float64(acmeWeight)/float64(acmeWeight+1), "acme-%-by-weight")
				require.Eventually(b, func() bool { return results.of("a")+results.of("g") == 800 }, 5*time.Minute, 5*time.Millisecond)
				b.ReportMetric(0, "ns/op")
			}
		})
	}
}
