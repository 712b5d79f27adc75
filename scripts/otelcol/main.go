// Command herald-otelcol is a minimal OpenTelemetry Collector for Herald's
// tests: an OTLP receiver (gRPC and HTTP) and a file exporter, built from the
// collector's own published modules. The upstream distributions (otelcorecol,
// otelcol-contrib, Jaeger) cannot be installed from the Go module proxy with
// `go install` because their go.mod files carry replace directives.
package main

import (
	"fmt"
	"os"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func components() (otelcol.Factories, error) {
	receivers, err := otelcol.MakeFactoryMap(otlpreceiver.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	exporters, err := otelcol.MakeFactoryMap(fileexporter.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	return otelcol.Factories{Receivers: receivers, Exporters: exporters, Telemetry: otelconftelemetry.NewFactory()}, nil
}

func main() {
	set := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "herald-otelcol", Description: "OTLP in, files out, for Herald's tests", Version: "0.141.0"},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{ResolverSettings: confmap.ResolverSettings{
			ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()},
			DefaultScheme:     "file",
		}},
	}
	if err := otelcol.NewCommand(set).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
