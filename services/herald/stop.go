package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// defaultDrain is how long `herald up` and `herald serve` wait, once asked
// to stop, for the work in flight before they stop it.
const defaultDrain = 5 * time.Second

// drainFlag is --drain of up and serve.
func drainFlag(fs *flag.FlagSet) *time.Duration {
	return fs.Duration("drain", defaultDrain, "how long stopping waits for work in flight (loop steps, model calls, tool calls) before it stops it; a second Ctrl-C stops at once")
}

// stopper counts the stop signals a server gets: the first ends its context
// (main's), the second ends the drain at once.
type stopper struct {
	sigs   chan os.Signal
	second chan struct{}
}

// watchStops starts counting SIGINT and SIGTERM; call it before waiting
// for the first, so no signal goes uncounted.
func watchStops() *stopper {
	s := &stopper{sigs: make(chan os.Signal, 4), second: make(chan struct{})}
	signal.Notify(s.sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		n := 0
		for range s.sigs {
			if n++; n == 2 {
				close(s.second)
			}
		}
	}()
	return s
}

// stop ends the counting, for a command that ends without draining.
func (s *stopper) stop() { signal.Stop(s.sigs) }

// drain says what stopping waits for and returns the context the services'
// shutdown gets: it ends after d, or at once on a second signal. What is
// still running then is stopped; its messages are redelivered (a tool call
// cut short is reported "outcome unknown", never run twice).
func (s *stopper) drain(w io.Writer, name string, d time.Duration) (context.Context, func()) {
	fmt.Fprintf(w, "%s: stopping — waiting up to %s for the work in flight (loop steps, model calls, tool calls) to finish; Ctrl-C again stops now (unfinished work is redelivered)\n", name, d)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	go func() {
		select {
		case <-s.second:
			fmt.Fprintf(w, "%s: stopping now\n", name)
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		cancel()
		s.stop()
	}
}
