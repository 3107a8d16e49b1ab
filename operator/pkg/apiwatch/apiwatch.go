// Package apiwatch turns on what uses an optional API, a CRD the chart
// does not install (the Gateway API's), as soon as the API server serves
// it: it looks in discovery when a component starts and then every
// Interval until each optional API is served, so installing the CRDs after
// the operator takes no restart. What it turns on stays on: watches
// cannot be taken back from a running controller, and a CRD removed again
// shows as the informers' list errors in the log.
package apiwatch

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
)

// DefaultInterval is how often discovery is asked while an optional API
// is missing: one small request, until every API is served.
const DefaultInterval = 10 * time.Second

// API is one optional API and what serving it takes.
type API struct {
	// Name says what it is in the log, e.g. "the Gateway API".
	Name string
	// GroupVersion and Kinds are what the API server must serve, all of
	// them, before Serve runs.
	GroupVersion metav1.GroupVersion
	Kinds        []string
	// Off says, in the log line of a start without it, what stays off
	// meanwhile.
	Off string
	// Serve turns on what uses the API. It runs once, before or after the
	// manager started; an error stops the component, which is restarted
	// and finds the API at start.
	Serve func() error
}

// Watcher serves each API once discovery shows it. It is a manager
// Runnable that needs no leader: every replica keeps its watches ready.
type Watcher struct {
	Discovery discovery.DiscoveryInterface
	// Interval between looks while some API is missing (default
	// DefaultInterval).
	Interval time.Duration
	Log      logr.Logger
	// APIs are looked at in order, so an API whose Serve needs another's
	// comes after it (and names that one's kinds too).
	APIs []API

	mu     sync.Mutex
	served []bool
}

// Check looks once and serves every API that is now served by the API
// server; it logs, once, each one that is not. Components call it before
// they start, so that what is installed is on from the first reconcile.
func (w *Watcher) Check() error {
	_, err := w.look(true)
	return err
}

// Start looks every Interval until every API is served.
func (w *Watcher) Start(ctx context.Context) error {
	interval := w.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		done, err := w.look(false)
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection: standby replicas get their watches too.
func (w *Watcher) NeedLeaderElection() bool { return false }

// look serves what discovery now shows; done when everything is served.
func (w *Watcher) look(first bool) (done bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.served == nil {
		w.served = make([]bool, len(w.APIs))
	}
	lists := map[metav1.GroupVersion]*metav1.APIResourceList{}
	done = true
	for i, api := range w.APIs {
		if w.served[i] {
			continue
		}
		missing, err := w.missing(api, lists)
		if err != nil {
			// A failed look is not an absent API: look again later.
			w.Log.V(1).Info("cannot read discovery; looking again later", "api", api.Name, "err", err.Error())
			done = false
			continue
		}
		if len(missing) > 0 {
			if first {
				w.Log.Info(fmt.Sprintf("%s is not installed (missing %v in %s); %s until it is: the operator looks for it every %s, no restart needed",
					api.Name, missing, api.GroupVersion, api.Off, w.interval()))
			}
			done = false
			continue
		}
		if err := api.Serve(); err != nil {
			return false, fmt.Errorf("turning on %s: %w", api.Name, err)
		}
		w.served[i] = true
		w.Log.Info(api.Name+" is installed: serving it", "groupVersion", api.GroupVersion.String(), "kinds", api.Kinds)
	}
	return done, nil
}

func (w *Watcher) interval() time.Duration {
	if w.Interval <= 0 {
		return DefaultInterval
	}
	return w.Interval
}

// missing lists the API's kinds the API server does not serve; lists
// caches this look's answers per group version.
func (w *Watcher) missing(api API, lists map[metav1.GroupVersion]*metav1.APIResourceList) ([]string, error) {
	list, ok := lists[api.GroupVersion]
	if !ok {
		var err error
		list, err = w.Discovery.ServerResourcesForGroupVersion(api.GroupVersion.String())
		switch {
		case apierrors.IsNotFound(err):
			list = &metav1.APIResourceList{}
		case err != nil:
			return nil, err
		}
		lists[api.GroupVersion] = list
	}
	var missing []string
	for _, k := range api.Kinds {
		if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Kind == k }) {
			missing = append(missing, k)
		}
	}
	return missing, nil
}
