package server_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
)

// On shutdown the edge stops taking public connections, lets a request in
// flight finish through its session, and only then ends the session, with
// the code that tells the agent to reconnect at once.
func TestEdgeShutdownFinishesRequestsInFlight(t *testing.T) {
	e := startEdge(t, t.TempDir())
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "inflight"})
	s := e.mustDial(t, tk.Key)
	bind(t, s, protocol.BindRequest{Protocol: "http"})
	started, release := make(chan struct{}), make(chan struct{})
	serveHTTP(t, s, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(started)
		<-release
		_, _ = io.WriteString(w, "finished")
	}))
	addr := e.HTTPAddr()
	type result struct {
		code int
		body string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		req.Host = "inflight." + baseDomain
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- result{code: resp.StatusCode, body: string(b)}
	}()
	<-started
	closed := make(chan error, 1)
	go func() { closed <- e.Close() }()
	waitFor(t, "the public listener to stop", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		return err != nil
	})
	// The session outlives the public listener while the request runs.
	select {
	case <-s.Done():
		t.Fatalf("session ended with a request in flight: %v", s.Err())
	case err := <-closed:
		t.Fatalf("edge closed with a request in flight: %v", err)
	case r := <-got:
		t.Fatalf("request ended before it was released: %+v", r)
	default:
	}
	close(release)
	if r := <-got; r.err != nil || r.code != http.StatusOK || r.body != "finished" {
		t.Fatalf("request in flight during shutdown: %+v", r)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	var term *tunnelclient.TerminatedError
	if err := waitDone(t, s); !errors.As(err, &term) || term.Code != protocol.CodeEdgeShuttingDown {
		t.Fatalf("session ended with %v, want %s", err, protocol.CodeEdgeShuttingDown)
	}
}
