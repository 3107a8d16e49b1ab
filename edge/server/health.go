package server

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
)

// listenerHealth records the listeners that stopped accepting for good.
// Transient accept errors (out of file descriptors and the like) are
// waited out (package accept); a listener that still ends is gone until
// the edge restarts, so /healthz fails from then on: the edge's liveness
// and readiness probes restart it, and the answer says which listener
// died and why.
type listenerHealth struct {
	mu   sync.Mutex
	dead map[string]string
}

func (h *listenerHealth) fail(what string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dead == nil {
		h.dead = map[string]string{}
	}
	h.dead[what] = err.Error()
}

// err describes the dead listeners, or is nil.
func (h *listenerHealth) err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.dead) == 0 {
		return nil
	}
	var lines []string
	for what, why := range h.dead {
		lines = append(lines, fmt.Sprintf("the %s listener stopped accepting: %s", what, why))
	}
	sort.Strings(lines)
	return fmt.Errorf("%s; restart the edge", strings.Join(lines, "; "))
}

// healthz answers "ok", or 503 naming every listener that stopped.
func (e *Edge) healthz(w http.ResponseWriter, _ *http.Request) {
	if err := e.health.err(); err != nil {
		http.Error(w, "tuna-edge: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}
