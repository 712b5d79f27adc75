package deploytest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/services/memory"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// ---- what the code knows -----------------------------------------------------

func readRepo(t *testing.T, parts ...string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(append([]string{repoRoot}, parts...)...))
	require.NoError(t, err)
	return string(data)
}

// knownEnv are the environment variables Herald reads: the HERALD_* names
// and provider key names written in pkg/config and the herald binary.
func knownEnv(t *testing.T) map[string]bool {
	t.Helper()
	lit := regexp.MustCompile(`"((?:HERALD_[A-Z0-9_]+)|(?:[A-Z]+_API_KEY))"`)
	files := []string{filepath.Join(repoRoot, "pkg", "config", "config.go")}
	more, err := filepath.Glob(filepath.Join(repoRoot, "services", "herald", "*.go"))
	require.NoError(t, err)
	files = append(files, more...)
	known := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range lit.FindAllStringSubmatch(string(data), -1) {
			known[m[1]] = true
		}
	}
	require.True(t, known["HERALD_NATS_URL"] && known["HERALD_CLICKHOUSE_DSN"] && known["OPENAI_API_KEY"], "scan found the config's variables: %v", known)
	return known
}

// commandFlags are the flags a herald command accepts: those its file
// (serve.go for `herald serve`) registers, and the common ones.
func commandFlags(t *testing.T, command string) map[string]bool {
	t.Helper()
	re := regexp.MustCompile(`fs\.\w+\((?:&[\w.]+, )?"([a-z][a-z-]*)"`)
	flags := map[string]bool{}
	for _, f := range []string{command + ".go", "flags.go"} {
		for _, m := range re.FindAllStringSubmatch(readRepo(t, "services", "herald", f), -1) {
			flags["--"+m[1]] = true
		}
	}
	require.True(t, flags["--config"], "scan found %s's flags: %v", command, flags)
	return flags
}

func serveFlags(t *testing.T) map[string]bool {
	t.Helper()
	flags := commandFlags(t, "serve")
	require.True(t, flags["--concurrency"], "scan found serve's flags: %v", flags)
	return flags
}

// requireDeclareCommand checks args is `declare [known flags]`.
func requireDeclareCommand(t *testing.T, where string, args []string) {
	t.Helper()
	require.NotEmpty(t, args, where)
	require.Equal(t, "declare", args[0], "%s runs `herald declare`", where)
	flags := commandFlags(t, "declare")
	for i := 1; i < len(args); i += 2 {
		name, _, _ := strings.Cut(args[i], "=")
		require.True(t, flags[name], "%s: herald declare has no flag %s", where, args[i])
	}
}

// requireServeCommand checks args is `serve <svc> [known flags]`.
func requireServeCommand(t *testing.T, where, svc string, args []string) {
	t.Helper()
	require.GreaterOrEqual(t, len(args), 2, "%s: command %v", where, args)
	require.Equal(t, []string{"serve", svc}, args[:2], "%s runs `herald serve %s`", where, svc)
	flags := serveFlags(t)
	for i := 2; i < len(args); i += 2 {
		name, _, _ := strings.Cut(args[i], "=")
		require.True(t, flags[name], "%s: herald serve has no flag %s", where, args[i])
	}
}

func requireKnownEnv(t *testing.T, where string, names []string, helpers map[string]bool) {
	t.Helper()
	known := knownEnv(t)
	for _, n := range names {
		require.True(t, known[n] || helpers[n], "%s: environment variable %s is read by nothing in Herald", where, n)
	}
}

// natsUsers loads herald.conf with the real server and returns its users by name.
func natsUsers(t *testing.T, file string) (*server.Options, map[string]*server.User) {
	t.Helper()
	for _, u := range append(append([]string{"admin", "client", "sys", "plugins", "api"}, serviceUsers...), tenantUsers...) {
		t.Setenv(passwordEnv(u), password(u))
	}
	opts, err := server.ProcessConfigFile(file)
	require.NoError(t, err)
	users := map[string]*server.User{}
	for _, u := range opts.Users {
		users[u.Username] = u
	}
	return opts, users
}

// passwordVars are the variables herald.conf takes passwords from.
func passwordVars(t *testing.T) []string {
	t.Helper()
	re := regexp.MustCompile(`password:\s*\$([A-Z_]+)`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(readRepo(t, "deploy", "nats", "herald.conf"), -1) {
		out = append(out, m[1])
	}
	sort.Strings(out)
	return out
}

// ---- the NATS configuration --------------------------------------------------

func TestNATSConfigHasOneUserPerService(t *testing.T) {
	opts, users := natsUsers(t, natsConf)
	require.True(t, opts.JetStream, "JetStream is on")
	require.Equal(t, "/data/jetstream", opts.StoreDir)
	require.EqualValues(t, 8<<20, opts.MaxPayload, "max payload matches the streams' 8 MiB message limit")
	for _, name := range append(slices.Clone(service.Names), "client", "admin", "api") {
		u, ok := users[name]
		require.True(t, ok, "herald.conf has a user %s", name)
		require.Equal(t, "HERALD", u.Account.Name, "user %s is in the HERALD account", name)
		require.Equal(t, password(name), u.Password, "user %s's password comes from %s", name, passwordEnv(name))
	}
	require.Equal(t, "SYS", users["sys"].Account.Name)
	require.ElementsMatch(t, append(append([]string{"sys", "client", "admin", "plugins", "api"}, service.Names...), tenantUsers...), mapKeys(users), "no other users")
	plugins := users["plugins"].Permissions
	require.Equal(t, password("plugins"), users["plugins"].Password)
	require.Equal(t, []string{"herald.hooks.>"}, plugins.Subscribe.Allow, "plugins hear the hooks only")
	require.Empty(t, plugins.Publish.Allow, "plugins publish nothing of their own")
	require.Equal(t, []string{">"}, plugins.Publish.Deny)
	require.NotNil(t, plugins.Response, "plugins may answer the requests they receive")
	require.Equal(t, 1, plugins.Response.MaxMsgs, "one answer per request")
	for _, name := range append(slices.Clone(service.Names), "api") {
		p := users[name].Permissions
		require.NotNil(t, p, "service user %s is restricted", name)
		require.NotContains(t, p.Publish.Allow, ">", "service user %s may not publish everywhere", name)
		require.NotContains(t, p.Subscribe.Allow, ">", "service user %s may not subscribe everywhere", name)
	}
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestNATSConfigNamesOnlyRealStreamsAndSubjects matches every subject of
// every allow list with the code: JetStream API subjects name streams that
// bus.Streams, bus.Buckets or a service's own bucket declare; herald.*
// subjects fall inside a stream's subjects or are a core request subject.
func TestNATSConfigNamesOnlyRealStreamsAndSubjects(t *testing.T) {
	_, users := natsUsers(t, natsConf)
	streams := map[string][]string{}
	for _, s := range bus.Streams(1) {
		streams[s.Name] = s.Subjects
	}
	var buckets []string
	for _, b := range bus.Buckets(1) {
		buckets = append(buckets, b.Bucket)
	}
	for _, b := range buckets {
		streams["KV_"+b] = []string{"$KV." + b + ".>"}
	}
	for _, o := range bus.ObjectStores(1) {
		streams["OBJ_"+o.Bucket] = []string{"$O." + o.Bucket + ".>"}
	}
	core := []string{bus.MemorySnapshotSubject, bus.ToolSpecsSubject, memory.SearchSubject, memory.RecallSubject,
		bus.HookOnSessionStart(), bus.HookPreLLMCall(), bus.HookPreAPIRequest(), bus.HookPostAPIRequest(), bus.HookPreToolCall(),
		bus.ContextFiles("*"), bus.ContextFiles(bus.DefaultPool), bus.RunnersPing, bus.ProvidersPaused}
	deadLetter := map[string]bool{"MEMORY_SNAPSHOT": true} // memory's core requests dead-letter here
	for s := range streams {
		deadLetter[s] = true
	}
	api := regexp.MustCompile(`^\$JS\.API\.(?:STREAM\.(?:INFO|CREATE|UPDATE|PURGE|MSG\.GET|MSG\.DELETE)|CONSUMER\.(?:CREATE|INFO|MSG\.NEXT|DELETE)|DIRECT\.GET)\.([A-Za-z0-9_-]+)(?:\.|$)`)
	ack := regexp.MustCompile(`^\$JS\.(?:ACK|FC)\.([A-Za-z0-9_-]+)\.`)
	for _, name := range append(slices.Clone(service.Names), "client", "api") {
		p := users[name].Permissions
		subjects := append(slices.Clone(p.Publish.Allow), p.Subscribe.Allow...)
		if p.Publish.Deny != nil {
			subjects = append(subjects, p.Publish.Deny...)
		}
		for _, subj := range subjects {
			switch {
			case subj == "_INBOX_"+name+".>" || subj == "$JS.API.INFO" || subj == "$JS.API.STREAM.LIST":
			case strings.HasPrefix(subj, "$JS.ACK."), strings.HasPrefix(subj, "$JS.FC."):
				m := ack.FindStringSubmatch(subj)
				require.NotNil(t, m, "%s: %s", name, subj)
				require.Contains(t, streams, m[1], "%s: %s acks on a stream Herald does not declare", name, subj)
			case strings.HasPrefix(subj, "$JS."):
				m := api.FindStringSubmatch(subj)
				require.NotNil(t, m, "%s: %s is not a JetStream API call Herald makes", name, subj)
				require.Contains(t, streams, m[1], "%s: %s names a stream Herald does not declare", name, subj)
			case strings.HasPrefix(subj, "$KV."):
				bucket := strings.Split(subj, ".")[1]
				require.Contains(t, streams, "KV_"+bucket, "%s: %s names a bucket Herald does not declare", name, subj)
			case strings.HasPrefix(subj, "$O."):
				bucket := strings.Split(subj, ".")[1]
				require.Contains(t, streams, "OBJ_"+bucket, "%s: %s names an object store Herald does not declare", name, subj)
			case strings.HasPrefix(subj, "herald.dlq."):
				require.True(t, deadLetter[strings.TrimPrefix(subj, "herald.dlq.")], "%s: %s", name, subj)
			case strings.HasPrefix(subj, "herald."):
				require.True(t, slices.Contains(core, subj) || inStream(subj, streams),
					"%s: %s is neither in a stream nor a core request subject", name, subj)
			default:
				t.Fatalf("%s: unexpected subject %s", name, subj)
			}
		}
	}
}

func inStream(subj string, streams map[string][]string) bool {
	for _, subjects := range streams {
		for _, s := range subjects {
			if server.SubjectMatchesFilter(subj, s) {
				return true
			}
		}
	}
	return false
}

func TestNATSClusterConfigAddsRoutesToTheSameUsers(t *testing.T) {
	t.Setenv("POD_NAME", "herald-nats-1")
	opts, users := natsUsers(t, filepath.Join(repoRoot, "deploy", "nats", "cluster.conf"))
	require.Equal(t, "herald-nats-1", opts.ServerName)
	require.Equal(t, "herald", opts.Cluster.Name)
	require.Len(t, opts.Routes, 3, "three nodes")
	require.Equal(t, 4222, opts.Port)
	_, base := natsUsers(t, natsConf)
	require.ElementsMatch(t, mapKeys(base), mapKeys(users), "the cluster has exactly herald.conf's users")
}

// ---- Dockerfile --------------------------------------------------------------

// dockerLines returns the Dockerfile's instructions with continuations joined.
func dockerLines(t *testing.T) []string {
	t.Helper()
	var out []string
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(readRepo(t, "deploy", "docker", "Dockerfile")))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		out = append(out, cur.String())
		cur.Reset()
	}
	return out
}

func TestDockerfileBuildsTheHeraldBinary(t *testing.T) {
	lines := dockerLines(t)
	var froms, copies, runs []string
	var entrypoint string
	for _, l := range lines {
		instr, rest, _ := strings.Cut(l, " ")
		switch strings.ToUpper(instr) {
		case "FROM":
			froms = append(froms, rest)
		case "COPY":
			copies = append(copies, rest)
		case "RUN":
			runs = append(runs, rest)
		case "ENTRYPOINT":
			entrypoint = rest
		case "ADD":
			t.Fatalf("ADD may fetch from the network; use COPY: %s", l)
		}
	}
	require.Len(t, froms, 2, "two stages: build and runtime")

	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(readRepo(t, "go.work"))
	require.NotNil(t, goVersion)
	require.Regexp(t, `^golang:`+regexp.QuoteMeta(goVersion[1])+`[-.]\S* AS build$`, froms[0], "the build stage uses go.work's Go")
	require.Regexp(t, `^debian:[a-z]+-slim$`, froms[1], "the runtime is Debian slim")

	// Every workspace module's go.mod is copied for the dependency layer.
	uses := regexp.MustCompile(`(?m)^\s+\./(\S+)$`).FindAllStringSubmatch(readRepo(t, "go.work"), -1)
	require.NotEmpty(t, uses)
	allCopies := strings.Join(copies, "\n")
	for _, u := range uses {
		require.Contains(t, allCopies, u[1]+"/go.mod", "module %s is copied", u[1])
	}
	for _, c := range copies {
		if strings.HasPrefix(c, "--from=") {
			continue
		}
		fields := strings.Fields(c)
		for _, src := range fields[:len(fields)-1] {
			_, err := os.Stat(filepath.Join(repoRoot, src))
			require.NoError(t, err, "COPY source %s exists", src)
		}
	}

	// go build ./services/herald -o X; X copied into the runtime; ENTRYPOINT runs it.
	build := regexp.MustCompile(`go build .*-o (\S+) (\./\S+)$`)
	var out, pkg string
	for _, r := range runs {
		if m := build.FindStringSubmatch(r); m != nil {
			out, pkg = m[1], m[2]
		}
		require.NotRegexp(t, `\b(curl|wget|git clone)\b`, r, "no downloads outside the package registries")
	}
	require.Equal(t, "./services/herald", pkg, "the image builds the herald binary")
	require.Contains(t, readRepo(t, "services", "herald", "main.go"), "package main")
	var installed string
	for _, c := range copies {
		if f := strings.Fields(c); len(f) == 3 && f[0] == "--from=build" && f[1] == out {
			installed = f[2]
		}
	}
	require.NotEmpty(t, installed, "the runtime copies %s from the build stage", out)
	var ep []string
	require.NoError(t, yaml.Unmarshal([]byte(entrypoint), &ep), "ENTRYPOINT is an exec-form array")
	require.Equal(t, installed, ep[len(ep)-1], "the entrypoint is the herald binary, so `serve <svc>` are its arguments")

	// ENV names are Herald's.
	env := regexp.MustCompile(`\b(HERALD_[A-Z_]+)=`).FindAllStringSubmatch(readRepo(t, "deploy", "docker", "Dockerfile"), -1)
	var names []string
	for _, m := range env {
		names = append(names, m[1])
	}
	require.NotEmpty(t, names)
	requireKnownEnv(t, "Dockerfile", names, nil)
}

// ---- compose -----------------------------------------------------------------

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
	Configs  map[string]struct {
		File string `yaml:"file"`
	} `yaml:"configs"`
}

type composeService struct {
	Image string `yaml:"image"`
	Build struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Configs     []struct {
		Source string `yaml:"source"`
		Target string `yaml:"target"`
	} `yaml:"configs"`
	Deploy struct {
		Replicas int `yaml:"replicas"`
	} `yaml:"deploy"`
	DependsOn map[string]any `yaml:"depends_on"`
}

var composeDir = filepath.Join(repoRoot, "deploy", "compose")

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(composeDir, "compose.yaml"))
	require.NoError(t, err)
	var c composeFile
	require.NoError(t, yaml.Unmarshal(data, &c))
	return c
}

// requireHeraldYAML loads a herald.yaml the way the binary does.
func requireHeraldYAML(t *testing.T, where string, data []byte) config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "herald.yaml")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	cfg, err := config.Load(path)
	require.NoError(t, err, "%s is a valid herald.yaml", where)
	return cfg
}

// composeVar is the variable a compose value takes from .env: ${NAME...}.
var composeVar = regexp.MustCompile(`^\$\{([A-Z_]+)[^}]*\}$`)

func TestComposeRunsEveryServiceUnderItsOwnUser(t *testing.T) {
	c := loadCompose(t)
	require.ElementsMatch(t, append([]string{"nats", "clickhouse", "declare"}, service.Names...), mapKeys(c.Services),
		"NATS, ClickHouse, the declare step and one container per service")

	// The declare step: `herald declare` as admin, once NATS is healthy.
	decl := c.Services["declare"]
	requireDeclareCommand(t, "compose service declare", decl.Command)
	requireKnownEnv(t, "compose service declare", mapKeys(decl.Environment), nil)
	require.Contains(t, decl.Environment["HERALD_NATS_URL"], ":${ADMIN_PASSWORD}@", "declare uses the admin password")
	du, err := url.Parse(dropVars(decl.Environment["HERALD_NATS_URL"]))
	require.NoError(t, err)
	require.Equal(t, "admin", du.User.Username(), "only admin may change streams")
	require.Equal(t, "nats:4222", du.Host)
	require.Equal(t, map[string]any{"condition": "service_healthy"}, decl.DependsOn["nats"])
	require.NotContains(t, decl.DependsOn, "declare")

	nats := c.Services["nats"]
	require.Regexp(t, `^nats:`+regexp.QuoteMeta(strings.TrimPrefix(natsServerVersion(t), "v"))+`(-|$)`, nats.Image,
		"the server is the version Herald is built and tested with")
	confMount := ""
	for _, v := range nats.Volumes {
		src, dst, _ := strings.Cut(v, ":")
		if filepath.Clean(filepath.Join(composeDir, src)) == filepath.Clean(natsConf) {
			confMount = strings.TrimSuffix(dst, ":ro")
		}
		if !strings.HasPrefix(src, ".") {
			require.Contains(t, c.Volumes, src, "named volume %s is declared", src)
		}
	}
	require.NotEmpty(t, confMount, "deploy/nats/herald.conf is mounted into the NATS container")
	require.Contains(t, nats.Command, confMount, "and the server is started with it")
	require.True(t, slices.ContainsFunc(nats.Volumes, func(v string) bool { return strings.HasSuffix(v, ":/data") }),
		"JetStream's store (/data/jetstream) is on a volume")
	for _, v := range passwordVars(t) {
		require.Equal(t, v, composeVar.FindStringSubmatch(nats.Environment[v])[1], "the NATS container gets %s from .env", v)
	}

	ch := c.Services["clickhouse"]
	for _, name := range service.Names {
		s := c.Services[name]
		where := "compose service " + name
		require.Equal(t, "herald:latest", s.Image, where)
		require.Equal(t, "../..", s.Build.Context, where)
		_, err := os.Stat(filepath.Join(composeDir, s.Build.Context, s.Build.Dockerfile))
		require.NoError(t, err, "%s builds from an existing Dockerfile", where)
		requireServeCommand(t, where, name, s.Command)
		requireKnownEnv(t, where, mapKeys(s.Environment), nil)
		require.Contains(t, s.DependsOn, "nats", where)
		require.Equal(t, map[string]any{"condition": "service_completed_successfully"}, s.DependsOn["declare"],
			"%s starts once the streams are declared", where)

		natsURL := s.Environment["HERALD_NATS_URL"]
		require.Contains(t, natsURL, ":${"+passwordEnv(name)+"}@", "%s uses its own password", where)
		u, err := url.Parse(dropVars(natsURL))
		require.NoError(t, err, where)
		require.Equal(t, "nats:4222", u.Host, "%s talks to the nats service", where)
		require.Equal(t, name, u.User.Username(), "%s connects as its own user", where)

		dsn, ok := s.Environment["HERALD_CLICKHOUSE_DSN"]
		require.Equal(t, name == "accounting", ok, "%s: only accounting talks to ClickHouse", where)
		if ok {
			pwVar := composeVar.FindStringSubmatch(ch.Environment["CLICKHOUSE_PASSWORD"])[1]
			require.Contains(t, dsn, ":${"+pwVar+"}@", "accounting uses ClickHouse's password")
			d, err := url.Parse(dropVars(dsn))
			require.NoError(t, err)
			require.Equal(t, "clickhouse", d.Scheme)
			require.Equal(t, "clickhouse:9000", d.Host, "the native port of the clickhouse service")
			require.Equal(t, ch.Environment["CLICKHOUSE_USER"], d.User.Username())
			require.Equal(t, "/"+ch.Environment["CLICKHOUSE_DB"], d.Path)
		}
		_, key := s.Environment["OPENAI_API_KEY"]
		require.Equal(t, name == "gateway", key, "%s: only the gateway holds a model key", where)

		require.Len(t, s.Configs, 1, where)
		require.Equal(t, s.Environment["HERALD_CONFIG"], s.Configs[0].Target, "%s reads the mounted herald.yaml", where)
		file := c.Configs[s.Configs[0].Source].File
		data, err := os.ReadFile(filepath.Join(composeDir, file))
		require.NoError(t, err)
		cfg := requireHeraldYAML(t, filepath.Join("deploy/compose", file), data)
		require.Equal(t, 1, cfg.Replicas, "one NATS server: one replica per stream")
		require.Equal(t, "check", cfg.NATSDeclare, "%s only checks the streams; its user may not change them", where)
	}
	require.GreaterOrEqual(t, c.Services["toolrunner"].Deploy.Replicas, 2, "tool runners are scaled out")

	// env.example names every variable the compose file takes from .env.
	example := readRepo(t, "deploy", "compose", "env.example")
	ref := regexp.MustCompile(`\$\{([A-Z_]+)`)
	for _, m := range ref.FindAllStringSubmatch(readRepo(t, "deploy", "compose", "compose.yaml"), -1) {
		require.Contains(t, example, m[1]+"=", "env.example lists %s", m[1])
	}
}

// dropVars replaces ${NAME} and $(NAME) references so a URL parses.
func dropVars(s string) string {
	return regexp.MustCompile(`\$[{(][A-Z_]+[^})]*[})]`).ReplaceAllString(s, "x")
}

func natsServerVersion(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`github.com/nats-io/nats-server/v2 (v\S+)`).FindStringSubmatch(readRepo(t, "pkg", "go.mod"))
	require.NotNil(t, m)
	return m[1]
}

// ---- Kubernetes ---------------------------------------------------------------

type k8sMeta struct {
	Name      string            `yaml:"name"`
	Namespace string            `yaml:"namespace"`
	Labels    map[string]string `yaml:"labels"`
}

type k8sEnv struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		SecretKeyRef *struct {
			Name     string `yaml:"name"`
			Key      string `yaml:"key"`
			Optional bool   `yaml:"optional"`
		} `yaml:"secretKeyRef"`
		FieldRef *struct {
			FieldPath string `yaml:"fieldPath"`
		} `yaml:"fieldRef"`
	} `yaml:"valueFrom"`
}

type k8sContainer struct {
	Name      string   `yaml:"name"`
	Image     string   `yaml:"image"`
	Command   []string `yaml:"command"`
	Args      []string `yaml:"args"`
	Env       []k8sEnv `yaml:"env"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type k8sObject struct {
	APIVersion string            `yaml:"apiVersion"`
	Kind       string            `yaml:"kind"`
	Metadata   k8sMeta           `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	Spec       struct {
		Replicas    int `yaml:"replicas"`
		MinReplicas int `yaml:"minReplicas"`
		MaxReplicas int `yaml:"maxReplicas"`
		// a KEDA ScaledObject's bounds and triggers
		MinReplicaCount int           `yaml:"minReplicaCount"`
		MaxReplicaCount int           `yaml:"maxReplicaCount"`
		Triggers        []kedaTrigger `yaml:"triggers"`
		Selector        struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Ports []struct {
			Name string `yaml:"name"`
			Port int    `yaml:"port"`
		} `yaml:"ports"`
		ScaleTargetRef struct {
			Kind string `yaml:"kind"`
			Name string `yaml:"name"`
		} `yaml:"scaleTargetRef"`
		Template struct {
			Metadata k8sMeta `yaml:"metadata"`
			Spec     struct {
				Containers []k8sContainer `yaml:"containers"`
				Volumes    []struct {
					Name      string `yaml:"name"`
					ConfigMap *struct {
						Name string `yaml:"name"`
					} `yaml:"configMap"`
					PersistentVolumeClaim *struct {
						ClaimName string `yaml:"claimName"`
					} `yaml:"persistentVolumeClaim"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata k8sMeta `yaml:"metadata"`
		} `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

var k8sDir = filepath.Join(repoRoot, "deploy", "k8s")

// loadK8s parses every document of every manifest, keyed by kind/name.
func loadK8s(t *testing.T) map[string]k8sObject {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(k8sDir, "*.yaml"))
	require.NoError(t, err)
	objs := map[string]k8sObject{}
	var kust struct {
		Namespace string   `yaml:"namespace"`
		Resources []string `yaml:"resources"`
	}
	var listed []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		if filepath.Base(f) == "kustomization.yaml" {
			require.NoError(t, yaml.Unmarshal(data, &kust))
			continue
		}
		listed = append(listed, filepath.Base(f))
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var o k8sObject
			err := dec.Decode(&o)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, f)
			require.NotEmpty(t, o.Kind, "%s: every document has a kind", f)
			key := o.Kind + "/" + o.Metadata.Name
			require.NotContains(t, objs, key, "%s is declared once", key)
			if o.Kind != "Namespace" {
				require.Equal(t, "herald", o.Metadata.Namespace, "%s is in the herald namespace", key)
			}
			objs[key] = o
		}
	}
	require.Equal(t, "herald", kust.Namespace)
	require.ElementsMatch(t, listed, kust.Resources, "kustomization.yaml lists every manifest")
	return objs
}

// envOf returns a container's variables by name, checking that each is
// known to Herald or used by another variable's value ($(NAME)).
func envOf(t *testing.T, where string, c k8sContainer) map[string]k8sEnv {
	t.Helper()
	env := map[string]k8sEnv{}
	helpers := map[string]bool{}
	ref := regexp.MustCompile(`\$\(([A-Z_]+)\)`)
	for _, e := range c.Env {
		env[e.Name] = e
		for _, m := range ref.FindAllStringSubmatch(e.Value, -1) {
			helpers[m[1]] = true
		}
	}
	for name := range helpers {
		require.Contains(t, env, name, "%s: $(%s) is defined", where, name)
	}
	requireKnownEnv(t, where, mapKeys(env), helpers)
	return env
}

// mountsConfig says whether container c of o mounts herald-config so that
// herald.yaml is at path.
func mountsConfig(o k8sObject, c k8sContainer, path string) bool {
	for _, m := range c.VolumeMounts {
		for _, v := range o.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil && v.ConfigMap.Name == "herald-config" &&
				filepath.Join(m.MountPath, "herald.yaml") == path {
				return true
			}
		}
	}
	return false
}

func TestKubernetesRunsEveryServiceUnderItsOwnUser(t *testing.T) {
	objs := loadK8s(t)
	natsSts, ok := objs["StatefulSet/herald-nats"]
	require.True(t, ok, "NATS runs as a StatefulSet")
	_, ok = objs["Service/herald-nats"]
	require.True(t, ok)
	require.Equal(t, 4222, objs["Service/herald-nats"].Spec.Ports[0].Port)
	_, users := natsUsers(t, natsConf)

	// Herald's configuration: valid, and replicas match the NATS cluster.
	cm, ok := objs["ConfigMap/herald-config"]
	require.True(t, ok)
	cfg := requireHeraldYAML(t, "ConfigMap herald-config", []byte(cm.Data["herald.yaml"]))
	require.Equal(t, natsSts.Spec.Replicas, cfg.Replicas, "streams keep one copy per NATS node")
	t.Setenv("POD_NAME", "herald-nats-0")
	copts, _ := natsUsers(t, filepath.Join(repoRoot, "deploy", "nats", "cluster.conf"))
	require.Len(t, copts.Routes, natsSts.Spec.Replicas, "cluster.conf routes to every NATS pod")

	// NATS: the cluster config, a store on a claim, every password from the users Secret.
	nc := natsSts.Spec.Template.Spec.Containers[0]
	require.Equal(t, "nats:"+strings.TrimPrefix(natsServerVersion(t), "v")+"-alpine", nc.Image)
	require.Contains(t, nc.Command, "/etc/nats/cluster.conf")
	require.Len(t, natsSts.Spec.VolumeClaimTemplates, 1)
	claim := natsSts.Spec.VolumeClaimTemplates[0].Metadata.Name
	require.True(t, slices.ContainsFunc(nc.VolumeMounts, func(m struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	}) bool {
		return m.Name == claim && strings.HasPrefix("/data/jetstream", m.MountPath)
	}), "JetStream's store (/data/jetstream) is on the claim")
	nenv := map[string]k8sEnv{}
	for _, e := range nc.Env {
		nenv[e.Name] = e
	}
	require.NotNil(t, nenv["POD_NAME"].ValueFrom.FieldRef, "server_name comes from the pod name")
	for _, v := range passwordVars(t) {
		e, ok := nenv[v]
		require.True(t, ok, "the NATS pods get %s", v)
		ref := e.ValueFrom.SecretKeyRef
		require.Equal(t, "herald-nats-users", ref.Name)
		require.Equal(t, strings.ToLower(strings.TrimSuffix(v, "_PASSWORD")), ref.Key)
		require.Contains(t, users, ref.Key, "secret key %s is a user of herald.conf", ref.Key)
	}

	// One Deployment per service.
	var deployments []string
	for key, o := range objs {
		if o.Kind == "Deployment" {
			deployments = append(deployments, strings.TrimPrefix(key, "Deployment/herald-"))
		}
	}
	require.ElementsMatch(t, service.Names, deployments)
	for _, name := range service.Names {
		d := objs["Deployment/herald-"+name]
		where := "Deployment herald-" + name
		require.GreaterOrEqual(t, d.Spec.Replicas, 1, where)
		require.Equal(t, d.Spec.Selector.MatchLabels, map[string]string{"app.kubernetes.io/name": name}, where)
		require.Equal(t, name, d.Spec.Template.Metadata.Labels["app.kubernetes.io/name"], where)
		require.Len(t, d.Spec.Template.Spec.Containers, 1, where)
		c := d.Spec.Template.Spec.Containers[0]
		require.Equal(t, "herald:latest", c.Image, where)
		require.Empty(t, c.Command, "%s uses the image's entrypoint (herald)", where)
		requireServeCommand(t, where, name, c.Args)
		for _, r := range []string{"cpu", "memory"} {
			require.NotEmpty(t, c.Resources.Requests[r], "%s requests %s", where, r)
			require.NotEmpty(t, c.Resources.Limits[r], "%s limits %s", where, r)
		}
		env := envOf(t, where, c)

		u, err := url.Parse(dropVars(env["HERALD_NATS_URL"].Value))
		require.NoError(t, err, where)
		require.Equal(t, "herald-nats:4222", u.Host, where)
		require.Equal(t, name, u.User.Username(), "%s connects as its own user", where)
		require.Contains(t, env["HERALD_NATS_URL"].Value, ":$(NATS_PASSWORD)@", where)
		ref := env["NATS_PASSWORD"].ValueFrom.SecretKeyRef
		require.Equal(t, "herald-nats-users", ref.Name, where)
		require.Equal(t, name, ref.Key, "%s takes its own user's password", where)

		_, dsn := env["HERALD_CLICKHOUSE_DSN"]
		require.Equal(t, name == "accounting", dsn, "%s: only accounting talks to ClickHouse", where)
		if dsn {
			d, err := url.Parse(dropVars(env["HERALD_CLICKHOUSE_DSN"].Value))
			require.NoError(t, err)
			require.Equal(t, "herald-clickhouse:9000", d.Host)
			_, ok := objs["Service/herald-clickhouse"]
			require.True(t, ok)
		}
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == "herald-model-keys" {
				require.Equal(t, "gateway", name, "only the gateway holds model keys")
				require.Equal(t, e.Name, e.ValueFrom.SecretKeyRef.Key)
			}
		}

		require.True(t, mountsConfig(d, c, env["HERALD_CONFIG"].Value), "%s mounts herald-config at HERALD_CONFIG", where)
	}

	// The declare Job: `herald declare` as admin, with the same herald.yaml.
	job, ok := objs["Job/herald-declare"]
	require.True(t, ok, "a Job declares the streams")
	require.Len(t, job.Spec.Template.Spec.Containers, 1)
	jc := job.Spec.Template.Spec.Containers[0]
	require.Equal(t, "herald:latest", jc.Image)
	requireDeclareCommand(t, "Job herald-declare", jc.Args)
	jenv := envOf(t, "Job herald-declare", jc)
	ju, err := url.Parse(dropVars(jenv["HERALD_NATS_URL"].Value))
	require.NoError(t, err)
	require.Equal(t, "admin", ju.User.Username(), "only admin may change streams")
	require.Equal(t, "herald-nats:4222", ju.Host)
	require.Equal(t, "admin", jenv["NATS_PASSWORD"].ValueFrom.SecretKeyRef.Key)
	require.True(t, mountsConfig(job, jc, jenv["HERALD_CONFIG"].Value), "the Job reads herald-config (replicas: 3)")
	require.Equal(t, "check", cfg.NATSDeclare, "the services only check the streams; their users may not change them")

	for _, name := range []string{"toolrunner", "gateway"} {
		so, ok := objs["ScaledObject/herald-"+name]
		require.True(t, ok, "%s scales automatically on its backlog", name)
		require.Equal(t, "Deployment", so.Spec.ScaleTargetRef.Kind)
		require.Equal(t, "herald-"+name, so.Spec.ScaleTargetRef.Name)
		require.GreaterOrEqual(t, so.Spec.MinReplicaCount, 1)
		require.Greater(t, so.Spec.MaxReplicaCount, so.Spec.MinReplicaCount)
	}
	for key := range objs {
		require.False(t, strings.HasPrefix(key, "HorizontalPodAutoscaler/"), "%s: KEDA owns the scaling; a second autoscaler would fight it", key)
	}
	_, ok = objs["PersistentVolumeClaim/herald-workspace"]
	require.True(t, ok, "the runners' shared workspace is claimed")
}
