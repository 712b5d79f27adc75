package deploytest

import (
	"context"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/heraldrun/herald/services/gateway"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"
)

// kedaTrigger is one trigger of a KEDA ScaledObject.
type kedaTrigger struct {
	Type     string            `yaml:"type"`
	Metadata map[string]string `yaml:"metadata"`
}

// TestKEDAScalesOnTheConsumersHeraldServes reads the ScaledObjects of
// deploy/k8s and checks each NATS JetStream trigger against a real server
// running deploy/nats/herald.conf, after `herald declare` and with the
// gateway and a tool runner started under their own users as `herald serve`
// starts them: the account, stream and consumer a trigger names are where
// the server's monitoring data (what KEDA reads, /jsz) shows that service's
// consumer, so the scaler counts the backlog of the work that service takes.
// A misspelt stream or consumer would make KEDA see no backlog and never
// scale out.
func TestKEDAScalesOnTheConsumersHeraldServes(t *testing.T) {
	s := startSecured(t) // sets the passwords herald.conf reads
	objs := loadK8s(t)
	// each service scales on the backlog of every consumer it takes work
	// from: a runner's calls and its quick reads, a gateway's requests
	want := map[string][]string{
		"toolrunner": {bus.ToolRunnerConsumer("default"), bus.ToolReadsConsumer("default")},
		"gateway":    {gateway.Durable},
	}
	triggers := map[string][]kedaTrigger{}
	for name, consumers := range want {
		so, ok := objs["ScaledObject/herald-"+name]
		require.True(t, ok, "a ScaledObject scales the %s", name)
		var named []string
		for _, tr := range so.Spec.Triggers {
			require.Equal(t, "nats-jetstream", tr.Type, "herald-%s scales on its consumers' backlog", name)
			lag, err := strconv.Atoi(tr.Metadata["lagThreshold"])
			require.NoError(t, err, "herald-%s: lagThreshold is a number", name)
			require.Positive(t, lag)
			requireMonitoringEndpoint(t, objs, tr.Metadata["natsServerMonitoringEndpoint"])
			named = append(named, tr.Metadata["consumer"])
		}
		require.ElementsMatch(t, consumers, named, "herald-%s scales on the backlog of each consumer it takes work from", name)
		triggers[name] = so.Spec.Triggers
	}

	s.declared(t)
	cfg := stackConfig(t, "")
	for name := range triggers {
		startService(t, s, cfg, name)
	}
	// herald status counts the runners: the tool runner answers its ping
	// under its own user.
	admin := s.connect(t, "admin")
	pong, err := admin.nc.Request(bus.RunnersPing, nil, 5*time.Second)
	require.NoError(t, err, "server refused: %v", s.violations())
	require.JSONEq(t, `{"pool":"default","concurrency":`+strconv.Itoa(runtime.NumCPU())+`}`, string(pong.Data))
	require.Empty(t, s.violations())
	for name, trs := range triggers {
		for _, tr := range trs {
			acc := tr.Metadata["account"]
			jsz, err := s.srv.NATS().Jsz(&server.JSzOptions{Account: acc, Consumer: true, Config: true})
			require.NoError(t, err)
			require.Len(t, jsz.AccountDetails, 1, "account %s of herald-%s's trigger is an account of herald.conf", acc, name)
			var consumers []string
			for _, st := range jsz.AccountDetails[0].Streams {
				if st.Name != tr.Metadata["stream"] {
					continue
				}
				for _, c := range st.Consumer {
					consumers = append(consumers, c.Name)
				}
			}
			require.Contains(t, consumers, tr.Metadata["consumer"],
				"herald-%s's trigger names stream %s and consumer %s; the running %s consumes from %v there",
				name, tr.Metadata["stream"], tr.Metadata["consumer"], name, consumers)
		}
	}
}

// requireMonitoringEndpoint checks that endpoint is the NATS pods' headless
// service at the monitoring port herald.conf opens, through which KEDA
// reaches every node of the cluster.
func requireMonitoringEndpoint(t *testing.T, objs map[string]k8sObject, endpoint string) {
	t.Helper()
	host, port, err := net.SplitHostPort(endpoint)
	require.NoError(t, err, "natsServerMonitoringEndpoint %q is host:port", endpoint)
	svc, ok := objs["Service/"+strings.Split(host, ".")[0]]
	require.True(t, ok, "natsServerMonitoringEndpoint %q names a Service of the manifests", endpoint)
	require.Equal(t, "herald-nats-cluster", svc.Metadata.Name, "the headless service, so KEDA reaches each node")
	require.True(t, strings.HasPrefix(host, "herald-nats-cluster.herald."), "in the herald namespace: %s", host)
	opts, err := server.ProcessConfigFile(natsConf)
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(opts.HTTPPort), port, "herald.conf's monitoring port")
	var served bool
	for _, p := range svc.Spec.Ports {
		served = served || strconv.Itoa(p.Port) == port
	}
	require.True(t, served, "the Service exposes port %s", port)
}

// TestGatewaySharesProviderLimitsUnderItsOwnUser: with providers.openai
// limits set, a gateway running as the gateway user of herald.conf keeps
// the provider's shared record (KV herald_provider_limits) while it answers
// a request the loop user sent, and the server refused it nothing: the
// limits hold across gateways in a deployment, not only in one process.
func TestGatewaySharesProviderLimitsUnderItsOwnUser(t *testing.T) {
	s := startSecured(t)
	admin := s.declared(t)
	cfg := stackConfig(t, "")
	cfg.Providers = map[string]config.ProviderProfile{"openai": {MaxConcurrent: 2, RPM: 600}}
	startService(t, s, cfg, "gateway")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lp := s.connect(t, "loop")
	req := &heraldpb.LLMRequest{RequestId: "s-limits:1:1:main", SessionId: "s-limits", TaskId: "t-limits", Purpose: "agent",
		Step: 1, Turn: 1, ReplySubject: bus.LLMResponse(bus.OwnerLoop, "s-limits"),
		Messages: []*heraldpb.ChatMessage{{Role: "user", Content: "read my notes"}}}
	require.NoError(t, bus.PublishProto(ctx, lp.js, bus.LLMRequest(req.SessionId), req.RequestId, req))
	require.Eventually(t, func() bool {
		m, err := bus.LastOnSubject(ctx, admin.js, bus.StreamLLMResponses, req.ReplySubject)
		var resp heraldpb.LLMResponse
		return err == nil && bus.Decode(m.Data, &resp) == nil && resp.GetError() == ""
	}, 20*time.Second, 20*time.Millisecond, "no answer; server refused: %v", s.violations())

	kv, err := admin.js.KeyValue(ctx, bus.BucketProviderLimits)
	require.NoError(t, err)
	e, err := kv.Get(ctx, "provider.openai")
	require.NoError(t, err, "the gateway wrote the provider's shared record; server refused: %v", s.violations())
	require.Contains(t, string(e.Value()), "rpm_at")
	require.Empty(t, s.violations())
}
