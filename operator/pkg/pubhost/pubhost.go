// Package pubhost is the published host: a host name of the edge that
// Ingress rules and Gateway listeners publish alike. It owns what is the
// same whatever the source: the reconcile request of a host, the order in
// which a host's publishers are considered (oldest first), the listing of
// a source's served objects by namespace or by host (one cache index of
// hosts for every source), and the vocabulary of a host's route table
// (path types and the conditions of a match) that the agent's router
// serves. Which objects a source serves and which hosts they publish are
// the source's own (operator/pkg/ingress, operator/pkg/gateway). It holds
// no reconciler and does no I/O beyond reading the cache.
package pubhost

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Request is the reconcile request of a host. Its namespace is empty,
// which no namespaced object has, so one controller can take both host
// requests and requests of the objects that publish hosts.
func Request(host string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Name: host}}
}

// IsRequest reports whether req names a host (else an object).
func IsRequest(req reconcile.Request) bool { return req.Namespace == "" }

// Queue is the work queue of a controller with host requests.
type Queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// SortOldestFirst orders objects by creation, then namespace/name
// (creation times have a one-second resolution): the order in which a
// host's publishers are considered (the oldest Ingress's path wins, the
// oldest namespace issues the key of a host without an owner), and the
// Gateway API's tie-break between routes.
func SortOldestFirst[T client.Object](objs []T) {
	slices.SortStableFunc(objs, func(a, b T) int {
		ta, tb := a.GetCreationTimestamp().Time, b.GetCreationTimestamp().Time
		if !ta.Equal(tb) {
			if ta.Before(tb) {
				return -1
			}
			return 1
		}
		if c := strings.Compare(a.GetNamespace(), b.GetNamespace()); c != 0 {
			return c
		}
		return strings.Compare(a.GetName(), b.GetName())
	})
}
