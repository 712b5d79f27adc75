package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// otelcolEnv names a built herald-otelcol (scripts/otelcol), a real
// OpenTelemetry Collector: OTLP receiver in, file exporter out. .ci/run
// builds it; elsewhere the test builds it on first use.
const otelcolEnv = "HERALD_TEST_OTELCOL"

var otelcolBuild struct {
	once sync.Once
	path string
	err  error
}

func otelcolBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(otelcolEnv); p != "" {
		return p
	}
	if p, err := exec.LookPath("herald-otelcol"); err == nil {
		return p
	}
	require.Empty(t, os.Getenv("CI"), "%s is not set: .ci/run builds the collector (scripts/otelcol)", otelcolEnv)
	otelcolBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "herald-otelcol-")
		if err != nil {
			otelcolBuild.err = err
			return
		}
		otelcolBuild.path = filepath.Join(dir, "herald-otelcol")
		cmd := exec.Command("go", "build", "-o", otelcolBuild.path, ".")
		cmd.Dir = filepath.Join("..", "..", "..", "scripts", "otelcol")
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			otelcolBuild.err = fmt.Errorf("building the collector: %w\n%s", err, out)
		}
	})
	require.NoError(t, otelcolBuild.err)
	return otelcolBuild.path
}

// collector is a running herald-otelcol writing every span it receives to
// a file, one OTLP/JSON export request per line.
type collector struct {
	HTTP, GRPC string // endpoints: http://127.0.0.1:port
	file       string
	out        *bytes.Buffer
}

func startCollector(t *testing.T) *collector {
	t.Helper()
	dir := t.TempDir()
	httpPort, grpcPort := freePort(t), freePort(t)
	c := &collector{HTTP: fmt.Sprintf("http://127.0.0.1:%d", httpPort), GRPC: fmt.Sprintf("http://127.0.0.1:%d", grpcPort),
		file: filepath.Join(dir, "spans.jsonl"), out: &bytes.Buffer{}}
	cfg := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http: {endpoint: "127.0.0.1:%d"}
      grpc: {endpoint: "127.0.0.1:%d"}
exporters:
  file: {path: %q, flush_interval: 100ms}
service:
  telemetry: {metrics: {level: none}}
  pipelines:
    traces: {receivers: [otlp], exporters: [file]}
`, httpPort, grpcPort, c.file)
	cfgPath := filepath.Join(dir, "otelcol.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(cfg), 0o644))
	cmd := exec.Command(otelcolBin(t), "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = c.out, c.out
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("collector output:\n%s", c.out.String())
		}
	})
	for _, port := range []int{httpPort, grpcPort} {
		require.Eventually(t, func() bool {
			conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			if err == nil {
				conn.Close()
			}
			return err == nil
		}, 30*time.Second, 50*time.Millisecond, "the collector never listened")
	}
	return c
}

// span is one received span with its resource's service name.
type span struct {
	Service      string
	TraceID      string
	SpanID       string
	ParentSpanID string
	Name         string
	Attrs        map[string]any
	Events       []string
	StatusCode   int
}

// The OTLP/JSON shapes the file exporter writes.
type otlpValue struct {
	StringValue *string                       `json:"stringValue"`
	IntValue    *json.Number                  `json:"intValue"`
	DoubleValue *float64                      `json:"doubleValue"`
	BoolValue   *bool                         `json:"boolValue"`
	ArrayValue  *struct{ Values []otlpValue } `json:"arrayValue"`
}

type otlpKV struct {
	Key   string    `json:"key"`
	Value otlpValue `json:"value"`
}

type otlpExport struct {
	ResourceSpans []struct {
		Resource   struct{ Attributes []otlpKV } `json:"resource"`
		ScopeSpans []struct {
			Spans []struct {
				TraceID      string   `json:"traceId"`
				SpanID       string   `json:"spanId"`
				ParentSpanID string   `json:"parentSpanId"`
				Name         string   `json:"name"`
				Attributes   []otlpKV `json:"attributes"`
				Events       []struct {
					Name string `json:"name"`
				} `json:"events"`
				Status struct {
					Code int `json:"code"`
				} `json:"status"`
			} `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
}

func (v otlpValue) value() any {
	switch {
	case v.StringValue != nil:
		return *v.StringValue
	case v.IntValue != nil:
		n, _ := v.IntValue.Int64()
		return n
	case v.DoubleValue != nil:
		return *v.DoubleValue
	case v.BoolValue != nil:
		return *v.BoolValue
	case v.ArrayValue != nil:
		var out []any
		for _, e := range v.ArrayValue.Values {
			out = append(out, e.value())
		}
		return out
	}
	return nil
}

func attrMap(kvs []otlpKV) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value.value()
	}
	return m
}

// raw is everything the collector wrote so far.
func (c *collector) raw(t *testing.T) string {
	data, err := os.ReadFile(c.file)
	if os.IsNotExist(err) {
		return ""
	}
	require.NoError(t, err)
	return string(data)
}

// spans parses every span the collector received so far.
func (c *collector) spans(t *testing.T) []span {
	var out []span
	sc := bufio.NewScanner(strings.NewReader(c.raw(t)))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var exp otlpExport
		if json.Unmarshal(sc.Bytes(), &exp) != nil {
			continue // a line being written
		}
		for _, rs := range exp.ResourceSpans {
			service, _ := attrMap(rs.Resource.Attributes)["service.name"].(string)
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					sp := span{Service: service, TraceID: s.TraceID, SpanID: s.SpanID, ParentSpanID: s.ParentSpanID,
						Name: s.Name, Attrs: attrMap(s.Attributes), StatusCode: s.Status.Code}
					for _, e := range s.Events {
						sp.Events = append(sp.Events, e.Name)
					}
					out = append(out, sp)
				}
			}
		}
	}
	return out
}
