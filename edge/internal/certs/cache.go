package certs

import (
	"container/list"
	"crypto/tls"
	"crypto/x509"
	"sync"
	"sync/atomic"
	"time"
)

// entry is one certificate in memory: parsed, its key opened, and the
// OCSP staple state. The served tls.Certificate is swapped whole when a
// staple arrives or lapses, so a handshake never sees half of a change.
type entry struct {
	name     string // the cache key: a host, or "*.parent" for a wildcard
	leaf     *x509.Certificate
	issuer   *x509.Certificate // nil for a self-signed or single cert
	managed  bool
	notAfter time.Time
	// owner uploaded the certificate ("" for the edge's own); ownerChecked
	// is when it was last found to hold the host.
	owner        string
	ownerChecked atomic.Int64

	served atomic.Pointer[tls.Certificate]
	// ocsp is the staple's state (ocsp.go); busy marks a fetch or a
	// store re-check in flight.
	ocspMu    sync.Mutex
	ocspNext  time.Time // refresh due
	ocspUntil time.Time // the staple's NextUpdate: not served past it
	busy      atomic.Bool
	// checked is when the store was last asked for a newer certificate
	// (renewal by another node); checking marks that look in flight.
	checked  atomic.Int64
	checking atomic.Bool
}

// lru is a bounded map of entries, least recently used evicted first.
type lru struct {
	mu    sync.Mutex
	max   int
	order *list.List // front: most recent; values *lruItem
	items map[string]*list.Element
}

type lruItem struct {
	key string
	e   *entry
}

func newLRU(max int) *lru {
	return &lru{max: max, order: list.New(), items: map[string]*list.Element{}}
}

func (c *lru) get(name string) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[name]
	if !ok {
		return nil
	}
	c.order.MoveToFront(el)
	return el.Value.(*lruItem).e
}

// put adds or replaces name's entry, evicting the least recently used
// beyond the bound.
func (c *lru) put(name string, e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[name]; ok {
		el.Value.(*lruItem).e = e
		c.order.MoveToFront(el)
		return
	}
	c.items[name] = c.order.PushFront(&lruItem{key: name, e: e})
	for c.order.Len() > c.max {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.items, old.Value.(*lruItem).key)
	}
}

func (c *lru) remove(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[name]; ok {
		c.order.Remove(el)
		delete(c.items, name)
	}
}

func (c *lru) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
