package status

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Transitions remembers the Ready status and reason last written for each
// object, so an event is recorded once per transition. The informer cache
// can lag behind our own status write; judging by the cached condition
// alone would record the same transition again on the next reconcile.
//
// It holds one entry per object that exists: the reconcilers Forget an
// object when it goes (its finalizer ran, or it was found gone), by key,
// which is all a reconcile of a deleted object knows.
type Transitions struct {
	last sync.Map // types.NamespacedName -> written
}

// written is what was last written for one object.
type written struct {
	uid            types.UID
	status, reason string
}

// Changed records cond as written for obj and reports whether it is a
// transition: different from what was last written, or (first time this
// process sees obj, or a new object of the same name) from old, the
// condition in the cached object.
func (t *Transitions) Changed(obj client.Object, old *metav1.Condition, cond metav1.Condition) bool {
	now := written{uid: obj.GetUID(), status: string(cond.Status), reason: cond.Reason}
	prev, seen := t.last.Swap(client.ObjectKeyFromObject(obj), now)
	if seen && prev.(written).uid == now.uid {
		return prev.(written) != now
	}
	return old == nil || old.Status != cond.Status || old.Reason != cond.Reason
}

// Forget drops the object key (it is gone).
func (t *Transitions) Forget(key types.NamespacedName) { t.last.Delete(key) }

// Len is how many objects are remembered.
func (t *Transitions) Len() int {
	n := 0
	t.last.Range(func(any, any) bool { n++; return true })
	return n
}
