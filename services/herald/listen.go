package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/heraldrun/herald/pkg/embedded"
)

// checkUpAddrs stops herald up before anything starts when its NATS or
// dashboard address is taken, naming the setting that moves it: a taken
// port found once ClickHouse and the services run would cost seconds and
// say less.
func checkUpAddrs(natsListen, httpAddr string) error {
	if err := addrFree(natsListen); err != nil {
		return natsAddrTaken(natsListen, err)
	}
	if httpAddr == "" {
		return nil
	}
	if err := addrFree(httpAddr); err != nil {
		return fmt.Errorf("the dashboard cannot listen on %s (%v): another herald up or another server has it? "+
			"Give it another address with --http %s (or HERALD_HTTP_ADDR), or --http \"\" to turn it off", httpAddr, err, nextPort(httpAddr))
	}
	return nil
}

// addrFree reports whether this process could listen on addr now.
func addrFree(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return ln.Close()
}

// natsListenError is err of starting herald up's NATS, said as
// natsAddrTaken when the server could not listen on addr (taken between the
// check and the start).
func natsListenError(addr string, err error) error {
	if errors.Is(err, embedded.ErrListen) {
		return natsAddrTaken(addr, err)
	}
	return err
}

// natsAddrTaken says herald up's NATS cannot listen on addr, and how to give
// it another address.
func natsAddrTaken(addr string, err error) error {
	next := nextPort(addr)
	return fmt.Errorf("NATS cannot listen on %s (%v): another herald up or NATS server has it? "+
		"Give it another address with --nats-listen %s, or HERALD_NATS_URL=nats://%s (where herald run then finds it)", addr, err, next, next)
}

// nextPort is addr with the port after its own, a free one more often than not.
func nextPort(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(port)
	if err != nil || perr != nil || n == 0 || n == 65535 {
		return "127.0.0.1:PORT"
	}
	return net.JoinHostPort(host, strconv.Itoa(n+1))
}
