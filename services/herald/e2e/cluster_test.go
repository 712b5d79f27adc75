package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/embedded"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// natsNode is one server of a JetStream cluster on loopback.
type natsNode struct {
	name string
	srv  *embedded.Server
	url  string
}

// startNATSCluster starts n embedded servers routed to each other, each
// with its own file store, and waits until JetStream accepts streams of
// replicas n.
func startNATSCluster(t *testing.T, n int) []*natsNode {
	t.Helper()
	clientPorts, routePorts := make([]int, n), make([]int, n)
	for i := range n {
		clientPorts[i], routePorts[i] = freePort(t), freePort(t)
	}
	var routes []string
	for _, p := range routePorts {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	nodes := make([]*natsNode, n)
	for i := range n {
		dir := t.TempDir()
		name := fmt.Sprintf("n%d", i+1)
		conf := filepath.Join(dir, "nats.conf")
		writeFile(t, conf, fmt.Sprintf(`server_name: %s
cluster {
  name: herald-test
  listen: 127.0.0.1:%d
  routes: [%s]
}
`, name, routePorts[i], strings.Join(routes, ", ")))
		srv, err := embedded.Start(embedded.Options{StoreDir: filepath.Join(dir, "store"), ConfigFile: conf,
			Listen: fmt.Sprintf("127.0.0.1:%d", clientPorts[i]), Log: heraldtestNop()})
		require.NoError(t, err, "start node %s", name)
		t.Cleanup(srv.Shutdown)
		nodes[i] = &natsNode{name: name, srv: srv, url: srv.ClientURL()}
	}
	return nodes
}

// clusterScript: each session writes a file named after its prompt, reads
// it back twice and answers with what it read; every model call takes
// 100 ms, so sessions are mid-run when a node dies. served counts calls.
func clusterScript(served *atomic.Int64) scripted.Script {
	return func(r *scripted.Request) scripted.Reply {
		served.Add(1)
		key := strings.TrimPrefix(r.FirstUser(), "cluster session ")
		var reply scripted.Reply
		switch r.AssistantCount() {
		case 0:
			reply = scripted.Tool("write_file", fmt.Sprintf(`{"path":"c-%s.txt","content":"payload %s"}`, key, key))
		case 1:
			reply = scripted.Tool("read_file", fmt.Sprintf(`{"path":"c-%s.txt"}`, key))
		case 2:
			reply = scripted.Tool("read_file", fmt.Sprintf(`{"path":"c-%s.txt","limit":5}`, key))
		default:
			reply = scripted.Text("answer " + key + ": " + strings.TrimSpace(lastToolText(r)))
		}
		reply.Delay = 100 * time.Millisecond
		return reply
	}
}

func lastToolText(r *scripted.Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "tool" {
			return r.Messages[i].Text()
		}
	}
	return ""
}

// TestClusterNodeKilledMidRunSessionsFinish runs Herald as `herald serve`
// processes against a 3-node JetStream cluster (every stream and bucket
// with 3 replicas, set by `replicas: 3` in herald.yaml), shuts down the node
// leading the SESSIONS stream while 30 sessions are mid-run, and checks
// that every session still finishes with the right answer and a complete,
// duplicate-free transcript.
func TestClusterNodeKilledMidRunSessionsFinish(t *testing.T) {
	const sessions = 30
	nodes := startNATSCluster(t, 3)
	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.url)
	}
	url := strings.Join(urls, ",")
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Each attempt gets its own deadline: a JetStream request sent before
	// the cluster has a meta leader is never answered.
	require.Eventually(t, func() bool {
		actx, acancel := context.WithTimeout(ctx, 3*time.Second)
		defer acancel()
		return bus.Ensure(actx, js, 3) == nil
	}, 60*time.Second, 100*time.Millisecond, "the cluster accepts replicas-3 streams")
	info, err := js.Stream(ctx, bus.StreamSessions)
	require.NoError(t, err)
	require.Equal(t, 3, info.CachedInfo().Config.Replicas)

	var served atomic.Int64
	model, err := scripted.Start(clusterScript(&served))
	require.NoError(t, err)
	t.Cleanup(model.Close)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "herald.yaml")
	writeFile(t, cfgPath, "replicas: 3\n")
	workspace := filepath.Join(dir, "workspace")
	c := &cluster{t: t, URL: url, NC: nc, JS: js, env: map[string]string{
		"HERALD_NATS_URL": url, "HERALD_CONFIG": cfgPath, "HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m",
		"HERALD_WORKSPACE": workspace, "HERALD_DATA_DIR": filepath.Join(dir, "data")}}
	t.Cleanup(c.stopAll)
	c.serve("gateway", "toolrunner", "memory", "compressor")
	c.serve("loop")
	c.serve("loop")

	tasks := make([]proto.Task, sessions)
	for i := range tasks {
		tasks[i] = NewTask(fmt.Sprintf("cluster session %d", i))
		submit(t, c, tasks[i])
	}
	// Kill once about a third of the model calls are served.
	require.Eventually(t, func() bool { return served.Load() >= sessions*4/3 }, 60*time.Second, 10*time.Millisecond,
		"sessions never got going")
	sinfo, err := js.Stream(ctx, bus.StreamSessions)
	require.NoError(t, err)
	leader := sinfo.CachedInfo().Cluster.Leader
	var victim *natsNode
	for _, n := range nodes {
		if n.name == leader {
			victim = n
		}
	}
	require.NotNil(t, victim, "SESSIONS has a leader (got %q)", leader)
	servedAtKill := served.Load()
	victim.srv.Shutdown()
	t.Logf("shut down %s (SESSIONS leader) after %d model calls", victim.name, servedAtKill)

	for i, task := range tasks {
		res := waitResult(t, c, task, 3*time.Minute)
		require.Equal(t, proto.ExitTextResponse, res.ExitReason, "session %d: %s", i, res.Error)
		require.Equal(t, fmt.Sprintf("answer %d: 1|payload %d", i, i), strings.TrimSpace(res.FinalResponse), "session %d", i)
		var roles []string
		for _, e := range committedTranscript(t, js, task.SessionID) {
			roles = append(roles, e.Message.Role)
		}
		require.Equal(t, []string{"system", "user", "assistant", "tool", "assistant", "tool", "assistant", "tool", "assistant"}, roles,
			"session %d transcript is complete and has no duplicates", i)
	}
	require.Less(t, servedAtKill, served.Load(), "work continued after the node died")
}
