package accounting

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"text/template"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/rs/zerolog"
)

// LocalClickHouse is a private clickhouse-server for `herald up`, `herald
// demo` and tests, listening on free loopback ports with its data in a
// folder of its own.
type LocalClickHouse struct {
	dir      string
	config   string
	tcpPort  int
	httpPort int
	log      zerolog.Logger

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// StartLocalClickHouse runs clickhouse-server from PATH with its data under
// dir and waits until it answers. It returns ErrNoClickHouse when the binary
// is not on PATH. The same dir keeps its data across restarts.
func StartLocalClickHouse(ctx context.Context, dir string, log zerolog.Logger) (*LocalClickHouse, error) {
	if _, err := exec.LookPath("clickhouse-server"); err != nil {
		return nil, ErrNoClickHouse
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	l := &LocalClickHouse{dir: dir, config: filepath.Join(dir, "config.xml"), tcpPort: ports[0], httpPort: ports[1],
		log: log.With().Str("component", "clickhouse").Logger()}
	if err := l.writeConfig(); err != nil {
		return nil, err
	}
	if err := l.Restart(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// DSN is the native-protocol DSN of the herald database on this server.
func (l *LocalClickHouse) DSN() string {
	return fmt.Sprintf("clickhouse://127.0.0.1:%d/%s", l.tcpPort, DefaultDatabase)
}

// Addr is host:port of the native protocol.
func (l *LocalClickHouse) Addr() string { return fmt.Sprintf("127.0.0.1:%d", l.tcpPort) }

// Restart starts the server again after Stop, on the same ports and data.
func (l *LocalClickHouse) Restart(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cmd != nil {
		return errors.New("clickhouse-server is already running")
	}
	cmd := exec.Command("clickhouse-server", "--config-file="+l.config)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = serverProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start clickhouse-server: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	if err := waitAnswering(ctx, l.Addr(), done); err != nil {
		_ = cmd.Process.Kill()
		<-done
		errLog, _ := os.ReadFile(filepath.Join(l.dir, "clickhouse-server.err.log"))
		return fmt.Errorf("clickhouse-server in %s did not start: %w\n%s%s", l.dir, err, out.String(), tail(errLog, 2000))
	}
	l.cmd, l.done = cmd, done
	l.log.Info().Str("addr", l.Addr()).Str("dir", l.dir).Msg("private ClickHouse started")
	return nil
}

// stopGrace is how long Stop waits after SIGTERM. 18.16 waits for idle
// client connections to time out before it exits; stored parts are already
// on disk, so killing it after a moment loses nothing that was acknowledged.
const stopGrace = 2 * time.Second

// Stop stops the server (SIGTERM, then SIGKILL after stopGrace). Safe twice.
func (l *LocalClickHouse) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cmd == nil {
		return
	}
	_ = l.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-l.done:
	case <-time.After(stopGrace):
		_ = syscall.Kill(-l.cmd.Process.Pid, syscall.SIGKILL)
		<-l.done
	}
	l.cmd, l.done = nil, nil
}

// waitAnswering pings addr until it answers, the process exits or ctx ends.
func waitAnswering(ctx context.Context, addr string, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, DialTimeout: time.Second})
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close()
			if err == nil {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("clickhouse-server exited")
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (l *LocalClickHouse) writeConfig() error {
	for _, sub := range []string{"data", "tmp", "user_files", "format_schemas"} {
		if err := os.MkdirAll(filepath.Join(l.dir, sub), 0o755); err != nil {
			return err
		}
	}
	var b bytes.Buffer
	if err := configTemplate.Execute(&b, map[string]any{"Dir": l.dir, "TCP": l.tcpPort, "HTTP": l.httpPort}); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(l.dir, "config.xml"), b.Bytes(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(l.dir, "users.xml"), []byte(usersXML), 0o644)
}

// configTemplate is a whole server configuration, not an override of
// /etc/clickhouse-server's, so the private server shares no port, path or
// log with a system one. It works on 18.16 and on current releases.
var configTemplate = template.Must(template.New("config").Parse(`<?xml version="1.0"?>
<yandex>
  <logger>
    <level>warning</level>
    <log>{{.Dir}}/clickhouse-server.log</log>
    <errorlog>{{.Dir}}/clickhouse-server.err.log</errorlog>
    <size>10M</size>
    <count>2</count>
  </logger>
  <listen_host>127.0.0.1</listen_host>
  <tcp_port>{{.TCP}}</tcp_port>
  <http_port>{{.HTTP}}</http_port>
  <max_concurrent_queries>100</max_concurrent_queries>
  <mark_cache_size>268435456</mark_cache_size>
  <uncompressed_cache_size>268435456</uncompressed_cache_size>
  <path>{{.Dir}}/data/</path>
  <tmp_path>{{.Dir}}/tmp/</tmp_path>
  <user_files_path>{{.Dir}}/user_files/</user_files_path>
  <format_schema_path>{{.Dir}}/format_schemas/</format_schema_path>
  <users_config>users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>UTC</timezone>
  <mlock_executable>false</mlock_executable>
  <shutdown_wait_unfinished>1</shutdown_wait_unfinished>
</yandex>
`))

const usersXML = `<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>4000000000</max_memory_usage></default></profiles>
  <users>
    <default>
      <password></password>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
  </users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors>
    <result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
`

// freePorts asks the kernel for n free loopback ports.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		_, p, _ := net.SplitHostPort(l.Addr().String())
		port, _ := strconv.Atoi(p)
		ports = append(ports, port)
	}
	return ports, nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
