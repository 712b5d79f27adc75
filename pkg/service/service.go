// Package service defines the lifecycle every Herald service implements and
// the dependencies the herald binary hands each of them.
package service

import (
	"context"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Service is one of loop, gateway, toolrunner, compressor, memory, accounting.
// Start returns once the service takes work; Shutdown stops taking work,
// drains what is in flight until ctx ends, and is safe to call twice or
// without Start.
type Service interface {
	Name() string
	Start(ctx context.Context) error
	Shutdown(ctx context.Context) error
}

// Deps are what the binary wires into every service.
type Deps struct {
	NC     *nats.Conn
	JS     jetstream.JetStream
	Log    zerolog.Logger
	Config config.Config
	// Instance names this process in results and events (e.g. the runner name).
	Instance string
}

// Names of the services, in start order.
var Names = []string{"accounting", "memory", "toolrunner", "compressor", "gateway", "loop"}
