package main

import "time"

// The two reference relays of the TCP rows: both hops in one process
// (one Go runtime, as the issue first measured it), and each hop in a
// process of its own, as tuna's edge and agent are. The second tells how
// much of tuna's distance to the first is two processes sharing two cores
// rather than encryption.
const (
	relayOneProcess   = "io.Copy relay, 2 hops"
	relayTwoProcesses = "io.Copy relay, 2 hops, a process each"
)

// startRelays starts both references in front of to and returns their
// entry addresses (one process first), with a stop for them all.
func (b *bench) startRelays(name, to string) (one, two string, stop func(), err error) {
	addrs, err := takeAddrs(4)
	if err != nil {
		return "", "", nil, err
	}
	var procs []*proc
	stop = func() {
		for _, p := range procs {
			p.stop()
		}
	}
	for _, s := range []struct {
		name string
		args []string
		wait string
	}{
		{name + "-relay2", []string{"tcp-relay2", addrs[0], addrs[1], to}, addrs[1]},
		{name + "-relay-hop2", []string{"tcp-relay", addrs[3], to}, addrs[3]},
		{name + "-relay-hop1", []string{"tcp-relay", addrs[2], addrs[3]}, addrs[2]},
	} {
		p, err := startProc(b.dir, s.name, b.self, s.args...)
		if err != nil {
			stop()
			return "", "", nil, err
		}
		procs = append(procs, p)
		if err := waitListening(p, s.wait, 30*time.Second); err != nil {
			stop()
			return "", "", nil, err
		}
	}
	return addrs[0], addrs[2], stop, nil
}
