package reservation

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// Held is a reservation a resource holds, as its reconciler last saw it.
type Held struct {
	UID types.UID
	// Address is the reservation's name on the edge: a Domain's full host
	// name, a TCPEndpoint's alias.
	Address string
	// Release says whether deleting the resource releases the reservation
	// (the reclaim rule, Release).
	Release bool
}

// Ledger remembers, for each resource, the reservation its reconciler made
// or keeps, so that one that goes without its finalizer still lets go of
// it. A resource can go so: its finalizer removed by hand, or skipped by the
// kube-apiserver when it was added while the deletion was in flight
// (kubernetes/kubernetes#77988), in which case the reconciler may have
// reserved after the resource was already gone. Reservations carry no
// label that ties them to a resource, so the ledger is what does; it is
// held in memory, and a controller that restarts in that moment leaves
// the reservation for the owner namespace to delete on the edge.
type Ledger struct {
	mu   sync.Mutex
	held map[types.NamespacedName]Held
}

// Hold records what key holds now, before its status is written: a status
// write that fails must not lose the reservation.
func (l *Ledger) Hold(key types.NamespacedName, h Held) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = map[types.NamespacedName]Held{}
	}
	l.held[key] = h
}

// Lookup returns what key with uid holds, if the ledger knows.
func (l *Ledger) Lookup(key types.NamespacedName, uid types.UID) (Held, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.held[key]
	return h, ok && h.UID == uid
}

// Len is how many resources the ledger holds.
func (l *Ledger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}

// Forget drops key once its finalizer has decided on its reservation.
func (l *Ledger) Forget(key types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.held, key)
}

// Gone settles the reservation of key, a resource found deleted whose
// finalizer did not forget it. inUse reports whether a live resource (read
// uncached) holds or asks for the address, the gone one included if the
// cache was behind; release deletes the reservation on the edge (one
// already gone there counts as released). A reservation that is adopted,
// retained or in use is left, as is one the edge says another owner holds
// now; any other error keeps the entry so that the retry can release it.
func (l *Ledger) Gone(ctx context.Context, key types.NamespacedName, kind string,
	inUse func(ctx context.Context, h Held) (bool, error), release func(ctx context.Context, address string) error) error {
	l.mu.Lock()
	h, ok := l.held[key]
	l.mu.Unlock()
	if !ok {
		return nil
	}
	if h.Release {
		used, err := inUse(ctx, h)
		if err != nil {
			return fmt.Errorf("checking whether %s of deleted %s %s is in use: %w", h.Address, kind, key, err)
		}
		if !used {
			err := release(ctx, h.Address)
			if _, owned := apiwire.OwnerOf(err); owned {
				// Another owner's now: it is not this resource's to release.
				log.FromContext(ctx).Info("left the reservation of a resource that went without its finalizer: another owner holds it now",
					"address", h.Address, "error", err.Error())
			} else if err != nil && !apiwire.IsNotFound(err) {
				return fmt.Errorf("releasing %s of %s %s, which went without its finalizer: %w", h.Address, kind, key, err)
			} else {
				log.FromContext(ctx).Info("released the reservation of a resource that went without its finalizer", "address", h.Address)
			}
		}
	}
	l.mu.Lock()
	if cur, ok := l.held[key]; ok && cur.UID == h.UID {
		delete(l.held, key)
	}
	l.mu.Unlock()
	return nil
}
