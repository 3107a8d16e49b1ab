package edgeapi

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// KeyPager reads the edge's tunnel keys a page at a time.
type KeyPager interface {
	ListTunnelKeysPage(ctx context.Context, in apiwire.KeyPageRequest) (*apiwire.KeyPage, error)
}

// DefaultKeyRefresh is how often the view is read again from the edge
// when no reader asks for a fresher one.
const DefaultKeyRefresh = time.Minute

// KeyView is the one cached view of this cluster's tunnel keys on the
// edge that every reconciler reads, instead of a list per reconcile. One
// lister fills it: in pages, and with the ETag of the last full read, so
// that an unchanged list costs one call answered 304. The operator's own
// writes go into it as they are made (Put, Forget), so a reconciler reads
// them at once; what others do on the edge (a key revoked by hand, a
// session that ended) shows at the next refresh.
//
// A view older than MaxAge is not answered from: List reads the edge
// again, and a reader gets the error of a failed read, so a reconciler
// still says when the edge cannot confirm its key. A failed read is not
// repeated for every reader: its error stands for those that ask within
// MaxAge of it, and the periodic refresh tries again.
type KeyView struct {
	api      KeyPager
	selector map[string]string
	// Interval between refreshes (default DefaultKeyRefresh, jittered).
	Interval time.Duration
	// MaxAge is the oldest view List answers from (default 2 × Interval).
	MaxAge time.Duration
	// PageSize is the page of each read (default client.MaxPage).
	PageSize int
	Log      logr.Logger
	// now is the clock (unit tests replace it).
	now func() time.Time

	// refresh serialises the reads of the edge; lastStart is when the
	// last completed one began, failedAt when the last failed one began
	// (failed is its error).
	refresh  sync.Mutex
	failed   error
	failedAt time.Time

	mu   sync.Mutex
	keys map[string]apiwire.TunnelKey
	// byLabel indexes keys by each of their labels: a reconciler lists
	// the keys of one object (its uid, its host), which few keys carry,
	// and a list costs those keys, not every key of the cluster.
	byLabel labelIndex
	// edgeList is the list as the edge last answered it in full, without the
	// operator's writes since: what a 304 to etag confirms.
	edgeList  map[string]apiwire.TunnelKey
	etag      string
	synced    bool
	lastStart time.Time
	// seq numbers the operator's own writes; local holds those a read
	// that began before them may not show, by key id (nil: forgotten).
	seq   uint64
	local map[string]localWrite
}

type localWrite struct {
	seq uint64
	key *apiwire.TunnelKey
}

// NewKeyView is a view of the keys whose labels include selector (this
// cluster's: {LabelCluster: id}).
func NewKeyView(api KeyPager, selector map[string]string) *KeyView {
	return &KeyView{api: api, selector: maps.Clone(selector), keys: map[string]apiwire.TunnelKey{}, byLabel: labelIndex{},
		local: map[string]localWrite{}, now: time.Now}
}

// NeedLeaderElection makes the view refresh on the leader only, where the
// reconcilers that read it run.
func (v *KeyView) NeedLeaderElection() bool { return true }

// Start refreshes the view every Interval (with jitter) until ctx ends.
func (v *KeyView) Start(ctx context.Context) error {
	interval := v.interval()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(Jitter(interval)):
		}
		// A reader that asked for a fresh view within the interval
		// refreshed it already.
		if err := v.Fresh(ctx, v.now().Add(-interval)); err != nil && ctx.Err() == nil {
			v.Log.Error(err, "refreshing the view of the edge's tunnel keys; trying again at the next interval")
		}
	}
}

func (v *KeyView) interval() time.Duration {
	if v.Interval > 0 {
		return v.Interval
	}
	return DefaultKeyRefresh
}

func (v *KeyView) maxAge() time.Duration {
	if v.MaxAge > 0 {
		return v.MaxAge
	}
	return 2 * v.interval()
}

// List returns the keys whose labels include labels, in id order. labels
// must name this view's selector (the cluster); a view older than MaxAge
// (or none yet) is read again first.
func (v *KeyView) List(ctx context.Context, labels map[string]string) ([]apiwire.TunnelKey, error) {
	if !matchLabels(labels, v.selector) {
		return nil, fmt.Errorf("tunnel keys %v are outside the shared view of %v", labels, v.selector)
	}
	since := v.now().Add(-v.maxAge())
	v.mu.Lock()
	current := v.synced && !v.lastStart.Before(since)
	v.mu.Unlock()
	if !current {
		if err := v.Fresh(ctx, since); err != nil {
			return nil, err
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []apiwire.TunnelKey
	if len(labels) == 0 { // a view of every key on the edge: all of them
		for _, k := range v.keys {
			out = append(out, k)
		}
	}
	for id := range v.byLabel.candidates(labels) {
		if k := v.keys[id]; matchLabels(k.Labels, labels) {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b apiwire.TunnelKey) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Fresh makes sure the view holds a read of the edge that began at or
// after since, reading the edge when it does not; when the last read
// began after since and failed, its error is the answer. Concurrent
// callers share one read.
func (v *KeyView) Fresh(ctx context.Context, since time.Time) error {
	v.refresh.Lock()
	defer v.refresh.Unlock()
	v.mu.Lock()
	done := v.synced && !v.lastStart.Before(since)
	v.mu.Unlock()
	if done {
		return nil
	}
	if v.failed != nil && !v.failedAt.Before(since) {
		return v.failed
	}
	start := v.now()
	err := v.read(ctx, start)
	if err != nil && ctx.Err() == nil {
		v.failed, v.failedAt = err, start
	}
	return err
}

// read reads the whole list, or hears that it did not change.
func (v *KeyView) read(ctx context.Context, start time.Time) error {
	v.mu.Lock()
	startSeq, etag := v.seq, v.etag
	if !v.synced {
		etag = ""
	}
	v.mu.Unlock()
	size := v.PageSize
	if size <= 0 {
		size = apiwire.MaxPage
	}
	req := apiwire.KeyPageRequest{Labels: v.selector, Limit: size, IfNoneMatch: etag}
	snapshot := map[string]apiwire.TunnelKey{}
	var newTag string
	for {
		page, err := v.api.ListTunnelKeysPage(ctx, req)
		if err != nil {
			return fmt.Errorf("reading the edge's tunnel keys: %w", err)
		}
		if page.NotModified {
			// The edge's list is the one etag named, not the view: a
			// key the operator wrote since may have gone again.
			v.mu.Lock()
			snapshot = maps.Clone(v.edgeList)
			v.mu.Unlock()
			newTag = etag
			break
		}
		if req.After == "" {
			newTag = page.ETag
		}
		for _, k := range page.Items {
			snapshot[k.ID] = k
		}
		if page.Next == "" {
			break
		}
		req.After, req.IfNoneMatch = page.Next, ""
	}
	if snapshot == nil {
		snapshot = map[string]apiwire.TunnelKey{}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.edgeList = maps.Clone(snapshot)
	// The operator's writes since the read began win over it: the read
	// may have missed them.
	for id, w := range v.local {
		if w.seq <= startSeq {
			continue
		}
		if w.key == nil {
			delete(snapshot, id)
		} else {
			snapshot[id] = *w.key
		}
	}
	v.settle(startSeq)
	v.byLabel = labelIndex{}
	for _, k := range snapshot {
		v.byLabel.add(k)
	}
	v.keys, v.etag, v.synced, v.lastStart, v.failed = snapshot, newTag, true, start, nil
	return nil
}

// settle forgets the local writes a read that began after them shows.
func (v *KeyView) settle(upTo uint64) {
	for id, w := range v.local {
		if w.seq <= upTo {
			delete(v.local, id)
		}
	}
}

// Put records a key the operator issued or renewed (without its secret).
func (v *KeyView) Put(k apiwire.TunnelKey) {
	if !matchLabels(k.Labels, v.selector) {
		return
	}
	k.Key = ""
	v.mu.Lock()
	defer v.mu.Unlock()
	v.seq++
	if old, ok := v.keys[k.ID]; ok {
		v.byLabel.remove(old)
	}
	v.keys[k.ID] = k
	v.byLabel.add(k)
	v.local[k.ID] = localWrite{seq: v.seq, key: &k}
}

// Forget records a key the operator revoked, or found gone.
func (v *KeyView) Forget(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.seq++
	if old, ok := v.keys[id]; ok {
		v.byLabel.remove(old)
	}
	delete(v.keys, id)
	v.local[id] = localWrite{seq: v.seq}
}

// labelIndex holds the ids of the keys that carry each label, by
// "name\x00value".
type labelIndex map[string]map[string]struct{}

func labelOf(name, value string) string { return name + "\x00" + value }

func (x labelIndex) add(k apiwire.TunnelKey) {
	for name, value := range k.Labels {
		l := labelOf(name, value)
		if x[l] == nil {
			x[l] = map[string]struct{}{}
		}
		x[l][k.ID] = struct{}{}
	}
}

func (x labelIndex) remove(k apiwire.TunnelKey) {
	for name, value := range k.Labels {
		l := labelOf(name, value)
		delete(x[l], k.ID)
		if len(x[l]) == 0 {
			delete(x, l)
		}
	}
}

// candidates are the ids of the keys that carry the rarest of labels (a
// superset of those that carry them all); none when a label is on no
// key, and none for no labels.
func (x labelIndex) candidates(labels map[string]string) map[string]struct{} {
	var best map[string]struct{}
	first := true
	for name, value := range labels {
		ids := x[labelOf(name, value)]
		if first || len(ids) < len(best) {
			best, first = ids, false
		}
	}
	return best
}

func matchLabels(have, want map[string]string) bool {
	for k, val := range want {
		if h, ok := have[k]; !ok || h != val {
			return false
		}
	}
	return true
}

// Jitter spreads a period: d plus up to a fifth of it, so objects whose
// periods began together do not all come due together again.
func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d + rand.N(d/5+1)
}
