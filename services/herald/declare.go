package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/services/herald/internal/app"
	"github.com/nats-io/nats.go/jetstream"
)

// cmdDeclare creates or updates every stream, KV bucket and object store on
// the NATS at HERALD_NATS_URL. Services only check that they are in place,
// so in a deployment with one NATS user per service this is the one step
// that needs a user allowed to change streams (deploy/README.md).
func cmdDeclare(ctx context.Context, args []string, cio cliIO) int {
	fs := newFlagSet("declare", cio.err)
	var c common
	c.register(fs)
	timeout := fs.Duration("timeout", time.Minute, "give up when NATS has not answered within this")
	if _, err := parseInterspersed(fs, args); err != nil {
		return flagExit(err)
	}
	cfg, err := c.load()
	if err != nil {
		fmt.Fprintln(cio.err, "herald declare:", err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	nc, err := app.Dial(ctx, cfg.NATSURL, "herald-declare", *timeout, app.InboxOption(cfg))
	if err != nil {
		fmt.Fprintln(cio.err, "herald declare:", err)
		return exitFail
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		fmt.Fprintln(cio.err, "herald declare:", err)
		return exitFail
	}
	var changes []bus.Change
	for {
		var done []bus.Change
		done, err = bus.Declare(ctx, js, cfg.Replicas)
		changes = append(changes, done...)
		// A server that has just started may not serve the API yet; a
		// user that may not declare will not be allowed on the next try.
		if err == nil || errors.Is(err, bus.ErrNotDeclared) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	for _, ch := range changes {
		if ch.Reason != "" {
			fmt.Fprintf(cio.out, "%s %s: %s\n", ch.Action, ch.Stream, ch.Reason)
		} else {
			fmt.Fprintf(cio.out, "%s %s\n", ch.Action, ch.Stream)
		}
	}
	if err != nil {
		fmt.Fprintln(cio.err, "herald declare:", err)
		return exitFail
	}
	fmt.Fprintf(cio.out, "streams up to date on %s (replicas %d)\n", app.RedactURL(cfg.NATSURL), max(cfg.Replicas, 1))
	return exitOK
}
