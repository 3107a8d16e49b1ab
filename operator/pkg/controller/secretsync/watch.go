package secretsync

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

// SecretsAPI is what the sync needs of the edge API (edge/client.Client).
type SecretsAPI interface {
	ListSecrets(ctx context.Context, prefix string) (*apiwire.SecretList, error)
	WatchSecrets(ctx context.Context, prefix, etag string, wait time.Duration) (*apiwire.SecretList, error)
	GetSecret(ctx context.Context, name string) (*apiwire.Secret, error)
}

// Hub turns the edge's change notices into reconciles. It keeps one long
// poll per key in use (the operator's, and each team key of an
// apiKeySecretRef), and when the list that key sees changes, it wakes the
// SecretSyncs whose source covers a changed name. The refresh interval is
// the fallback when notices fail; a notice only makes a sync sooner.
type Hub struct {
	// Events feeds the controller (source.Channel).
	Events chan event.GenericEvent
	// Wait is how long the edge may hold one poll (default 50s; the edge
	// caps it at 60s).
	Wait time.Duration

	ctx      context.Context
	mu       sync.Mutex
	watchers map[string]*watcher
	subs     map[types.NamespacedName]subscription
}

type watcher struct {
	cancel context.CancelFunc
	refs   int
}

type subscription struct {
	cred   string
	source tunav1.SecretSyncSource
}

// NewHub returns a hub whose polls end with ctx.
func NewHub(ctx context.Context) *Hub {
	return &Hub{ctx: ctx, Events: make(chan event.GenericEvent, 256),
		watchers: map[string]*watcher{}, subs: map[types.NamespacedName]subscription{}}
}

// Subscribe makes changes of source, as seen by the key cred (an id of the
// key, never the key), wake obj. api is that key's client; it is used only
// when no poll of cred runs yet.
func (h *Hub) Subscribe(obj types.NamespacedName, cred string, api SecretsAPI, source tunav1.SecretSyncSource) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if old, ok := h.subs[obj]; ok {
		if old.cred == cred {
			h.subs[obj] = subscription{cred: cred, source: source}
			return
		}
		h.release(old.cred)
	}
	h.subs[obj] = subscription{cred: cred, source: source}
	w, ok := h.watchers[cred]
	if !ok {
		ctx, cancel := context.WithCancel(h.ctx)
		w = &watcher{cancel: cancel}
		h.watchers[cred] = w
		go h.poll(ctx, cred, api)
	}
	w.refs++
}

// Unsubscribe forgets obj; the last subscriber of a key stops its poll.
func (h *Hub) Unsubscribe(obj types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if old, ok := h.subs[obj]; ok {
		delete(h.subs, obj)
		h.release(old.cred)
	}
}

// Polls is the number of long polls running, one per key in use.
func (h *Hub) Polls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.watchers)
}

func (h *Hub) release(cred string) {
	if w, ok := h.watchers[cred]; ok {
		if w.refs--; w.refs <= 0 {
			w.cancel()
			delete(h.watchers, cred)
		}
	}
}

// poll long-polls the list the key sees and notifies on each difference.
// On errors it backs off and polls again; the first list after an outage
// is compared with the last one before it, so a change made while the
// edge was unreachable still wakes its SecretSyncs.
func (h *Hub) poll(ctx context.Context, cred string, api SecretsAPI) {
	logger := log.FromContext(ctx).WithName("secretsync-watch")
	var prev map[string]string
	etag := ""
	backoff := time.Second
	for ctx.Err() == nil {
		list, err := api.WatchSecrets(ctx, "", etag, h.wait())
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			logger.V(1).Info("watching edge secrets failed; the refresh interval still applies", "err", err, "retryIn", backoff)
			etag = ""
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 30*time.Second)
			continue
		}
		backoff = time.Second
		if list == nil {
			continue // nothing changed within the wait
		}
		cur := make(map[string]string, len(list.Items))
		for _, s := range list.Items {
			// A secret deleted and created again starts at version 1
			// anew: its creation time tells the two apart.
			cur[s.Name] = fmt.Sprintf("%d@%d", s.Version, s.CreatedAt.UnixNano())
		}
		if prev != nil {
			h.notify(ctx, cred, changed(prev, cur))
		}
		prev, etag = cur, list.ETag
	}
}

func (h *Hub) wait() time.Duration {
	if h.Wait > 0 {
		return h.Wait
	}
	return 50 * time.Second
}

// changed lists the names added, removed or at another version (or
// creation).
func changed(prev, cur map[string]string) []string {
	var out []string
	for n, v := range cur {
		if pv, ok := prev[n]; !ok || pv != v {
			out = append(out, n)
		}
	}
	for n := range prev {
		if _, ok := cur[n]; !ok {
			out = append(out, n)
		}
	}
	return out
}

func (h *Hub) notify(ctx context.Context, cred string, names []string) {
	if len(names) == 0 {
		return
	}
	h.mu.Lock()
	var wake []types.NamespacedName
	for obj, s := range h.subs {
		if s.cred == cred && covers(s.source, names) {
			wake = append(wake, obj)
		}
	}
	h.mu.Unlock()
	for _, obj := range wake {
		ev := event.GenericEvent{Object: &tunav1.SecretSync{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: obj.Name}}}
		select {
		case h.Events <- ev:
		case <-ctx.Done():
			return
		}
	}
}

// covers reports whether source takes one of names.
func covers(source tunav1.SecretSyncSource, names []string) bool {
	for _, n := range names {
		if source.Name != "" && n == source.Name || source.Prefix != "" && len(n) >= len(source.Prefix) && n[:len(source.Prefix)] == source.Prefix {
			return true
		}
	}
	return false
}
