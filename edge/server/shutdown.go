package server

import (
	"context"
	"errors"
	"time"
)

// shutdownGrace bounds how long Close lets public connections in flight
// finish.
const shutdownGrace = 5 * time.Second

// Close stops the public listeners, lets the connections in flight finish
// (within shutdownGrace), terminates every session with edge_shutting_down
// and closes the store.
func (e *Edge) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	servers := e.servers
	e.mu.Unlock()

	// Leaving first takes the node off GET /v1/nodes while its sessions
	// are told it shuts down.
	if e.member != nil {
		e.member.Leave()
	}
	// Public traffic stops first and what is in flight finishes while the
	// sessions still carry it: the TCP listeners close, the HTTP servers
	// shut down (waiting for requests in flight), open TCP streams get the
	// rest of the grace period; then the sessions end, with a code that
	// tells agents to reconnect at once.
	var errs []error
	e.ports.Close()
	if e.stopExpiry != nil {
		e.stopExpiry()
	}
	if e.stopTLS != nil {
		e.stopTLS()
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	for _, srv := range servers {
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
	}
	if err := e.ssh.WaitIdle(ctx); err != nil {
		e.log.Info("closing tunnel sessions with connections in flight", "err", err)
	}
	if err := e.ssh.Close(); err != nil {
		errs = append(errs, err)
	}
	e.wg.Wait()
	if e.follow != nil {
		e.follow.stop()
	}
	if err := e.st.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
