package main

import (
	"fmt"
	"time"
)

const echoBench = "TCP echo"

// tcpSection streams echoBytes through an echo server: direct, through a
// tuna tcp tunnel and through the two-hop io.Copy relays.
func (b *bench) tcpSection() error {
	addrs, err := takeAddrs(1)
	if err != nil {
		return err
	}
	echo := addrs[0]
	srv, err := startProc(b.dir, "echo", b.self, "echo", echo)
	if err != nil {
		return err
	}
	defer srv.stop()
	if err := waitListening(srv, echo, 30*time.Second); err != nil {
		return err
	}
	direct, err := b.echoRow("direct", echo, 0)
	if err != nil {
		return err
	}
	if err := b.tunaTCP("echo", echo, nil, func(addr string, e *edgeProc, a *agentProc) error {
		if _, err := b.echoRow("tuna tcp tunnel", addr, direct); err != nil {
			return err
		}
		if b.profileDir == "" {
			return nil
		}
		return b.profile("tcp", e, a, func(d time.Duration) error {
			for end := time.Now().Add(d); time.Now().Before(end); {
				if _, err := echoRate(addr, b.echoBytes); err != nil {
					return err
				}
			}
			return nil
		})
	}); err != nil {
		return err
	}
	one, two, stop, err := b.startRelays("echo", echo)
	if err != nil {
		return err
	}
	defer stop()
	if _, err := b.echoRow(relayOneProcess, one, direct); err != nil {
		return err
	}
	_, err = b.echoRow(relayTwoProcesses, two, direct)
	return err
}

// tunaTCP runs fn with the public address of a tuna tcp tunnel (a fresh
// edge started with the flags in edgeArgs, an endpoint alias, an agent) to
// upstream, then tears it down.
func (b *bench) tunaTCP(alias, upstream string, edgeArgs []string, fn func(addr string, e *edgeProc, a *agentProc) error) error {
	step("tuna tcp tunnel %s: starting the edge and the agent", alias)
	e, err := b.startEdge("edge-"+alias, edgeArgs...)
	if err != nil {
		return err
	}
	defer e.stop()
	key, addr, err := e.tcpKey(alias)
	if err != nil {
		return err
	}
	a, err := b.startAgent(e, "agent-"+alias, "tcp", upstream, []string{key}, 1)
	if err != nil {
		return err
	}
	defer a.stop()
	if err := waitListening(e.proc, addr, 30*time.Second); err != nil {
		return err
	}
	return fn(addr, e, a)
}

func (b *bench) echoRow(path, addr string, direct float64) (float64, error) {
	step("%s: echo of %d MiB", path, b.echoBytes>>20)
	load := loadavg()
	rate, err := echoRate(addr, b.echoBytes)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	b.rows = append(b.rows, row{bench: fmt.Sprintf("%s %d MiB", echoBench, b.echoBytes>>20), path: path,
		value: rate, unit: "MiB/s", direct: direct, load: load})
	return rate, nil
}
