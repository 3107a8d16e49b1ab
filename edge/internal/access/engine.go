// Package access enforces access policies at the edge, in the request
// path, before a request enters a tunnel (docs/access.md): the rules of
// each policy in order (public, deny, ip, oidc, basic_auth, links), rate
// limits, the session cookies and the login flow that the edge serves on
// every protected host under /.tuna/, the identity fields and signed
// assertion the upstream gets, header edits, and the edge's own pages.
//
// The public router calls it through two hooks: Relay, for the h1 relay,
// which lets through a request whose session cookie opens (one AEAD open,
// no network call) and leaves anything else to net/http; and Serve, for
// net/http, which answers logins, callbacks, links, denials and limits.
// An address without a policy never reaches this package.
package access

import (
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Reserved paths on every protected host: the edge answers them itself
// and never forwards them.
const (
	Prefix       = "/.tuna/"
	LoginPath    = "/.tuna/login"
	CallbackPath = "/.tuna/callback"
	LogoutPath   = "/.tuna/logout"
)

// LinkUses counts the uses of shareable links in the edge's shared state,
// so that every node of a cluster counts against one number.
type LinkUses interface {
	// UseLink counts one use of a link, unless max uses were counted
	// already (then it returns ErrUsedUp); it keeps the count until
	// expires.
	UseLink(policy, id string, max int, expires time.Time) error
}

// ErrUsedUp is a link that was followed as many times as it allows.
var ErrUsedUp = errors.New("the link was used as many times as it allows")

// Config configures an Engine.
type Config struct {
	// IdPClient makes the requests to identity providers (discovery,
	// keys, token exchange); its Timeout bounds each.
	IdPClient *http.Client
	// IdPRecheck is how long a provider's discovery is trusted before a
	// login checks it again (default 30s).
	IdPRecheck time.Duration
	Uses       LinkUses
	Now        func() time.Time
	Logger     *slog.Logger
}

// DefaultIdPRecheck is Config.IdPRecheck's default.
const DefaultIdPRecheck = 30 * time.Second

// Engine holds the compiled policies and the keys, and decides.
type Engine struct {
	cfg        Config
	log        *slog.Logger
	keys       atomic.Pointer[keyring]
	table      atomic.Pointer[map[string]*Policy]
	writeMu    sync.Mutex
	providers  *providers
	guard      *guard
	assertions assertions
}

// New returns an engine with no policy and no keys (SetKeys before use).
func New(cfg Config) *Engine {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.IdPClient == nil {
		cfg.IdPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.IdPRecheck <= 0 {
		cfg.IdPRecheck = DefaultIdPRecheck
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Engine{cfg: cfg, log: cfg.Logger.With("component", "access"), guard: newGuard(),
		providers:  &providers{client: cfg.IdPClient, recheck: cfg.IdPRecheck, all: map[string]*providerState{}},
		assertions: assertions{cache: map[identityKey]*identityFields{}}}
	empty := map[string]*Policy{}
	e.table.Store(&empty)
	return e
}

// SetKeys installs the access keys (after a rotation too).
func (e *Engine) SetKeys(k Keys) error {
	r, err := newKeyring(k)
	if err != nil {
		return err
	}
	e.keys.Store(r)
	return nil
}

// KeyIDs are the ids of the session and assertion keys, those in use
// first.
func (e *Engine) KeyIDs() (sessions, assertions []string) {
	r := e.keys.Load()
	if r == nil {
		return nil, nil
	}
	return r.ids.sessions, r.ids.assertions
}

// JWKS is the JSON Web Key Set that verifies the assertions.
func (e *Engine) JWKS() []byte {
	if r := e.keys.Load(); r != nil {
		return r.jwks
	}
	return []byte(`{"keys":[]}`)
}

// Lookup returns the policy with id, or nil.
func (e *Engine) Lookup(id string) *Policy { return (*e.table.Load())[id] }

// Put installs p, replacing the policy of the same id.
func (e *Engine) Put(p *Policy) {
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	next := cloneTable(*e.table.Load())
	next[p.ID] = p
	e.table.Store(&next)
}

// Remove drops the policy id.
func (e *Engine) Remove(id string) {
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	next := cloneTable(*e.table.Load())
	delete(next, id)
	e.table.Store(&next)
}

// Replace installs exactly ps.
func (e *Engine) Replace(ps []*Policy) {
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	next := make(map[string]*Policy, len(ps))
	for _, p := range ps {
		next[p.ID] = p
	}
	e.table.Store(&next)
}

// IDs lists the installed policies' ids.
func (e *Engine) IDs() []string {
	t := *e.table.Load()
	out := make([]string, 0, len(t))
	for id := range t {
		out = append(out, id)
	}
	return out
}

func cloneTable(t map[string]*Policy) map[string]*Policy {
	out := make(map[string]*Policy, len(t)+1)
	for k, v := range t {
		out[k] = v
	}
	return out
}

// TCPAllowed decides a TCP connection from remote to an address guarded
// by the policy id: only a policy of ip rules for every request can guard
// one; anything else, or a policy that is missing, refuses the connection
// (fails closed).
func (e *Engine) TCPAllowed(id, remote string) bool {
	if e == nil {
		return false
	}
	p := e.Lookup(id)
	if p == nil || !p.tcp {
		return false
	}
	for _, r := range p.rules {
		if !r.ip.AllowedAddr(remote) {
			return false
		}
	}
	return true
}

// GuardsTCP reports whether the policy could guard a TCP address.
func (p *Policy) GuardsTCP() bool { return p.tcp }
