package httpfwd

import (
	"context"
	"net"
	"net/http"
	"sync"
)

type idleKey struct{}

// Pin makes srv keep an Idle for each connection it serves, in the context
// of the connection's requests (IdleOf), and close it with the
// connection. It sets srv's ConnContext and ConnState.
func Pin(srv *http.Server) {
	var mu sync.Mutex
	sets := map[net.Conn]*Idle{}
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		idle := &Idle{}
		mu.Lock()
		sets[c] = idle
		mu.Unlock()
		return WithIdle(ctx, idle)
	}
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		if st != http.StateClosed && st != http.StateHijacked {
			return
		}
		mu.Lock()
		idle := sets[c]
		delete(sets, c)
		mu.Unlock()
		if idle != nil {
			idle.Close()
		}
	}
}

// WithIdle makes idle the Idle of the requests of ctx (IdleOf), for a
// connection that no http.Server serves (a framed tunnel channel).
func WithIdle(ctx context.Context, idle *Idle) context.Context {
	return context.WithValue(ctx, idleKey{}, idle)
}

// IdleOf returns the Idle of the connection a request came on, when its
// server was set up with Pin.
func IdleOf(ctx context.Context) (*Idle, bool) {
	idle, ok := ctx.Value(idleKey{}).(*Idle)
	return idle, ok
}
