package status

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Transitions remembers the Ready status and reason last written for each
// object, so an event is recorded once per transition. The informer cache
// can lag behind our own status write; judging by the cached condition
// alone would record the same transition again on the next reconcile.
type Transitions struct {
	last sync.Map // types.UID -> [2]string{status, reason}
}

// Changed records cond as written for uid and reports whether it is a
// transition: different from what was last written, or (first time this
// process sees uid) from old, the condition in the cached object.
func (t *Transitions) Changed(uid types.UID, old *metav1.Condition, cond metav1.Condition) bool {
	now := [2]string{string(cond.Status), cond.Reason}
	prev, seen := t.last.Swap(uid, now)
	if seen {
		return prev.([2]string) != now
	}
	return old == nil || old.Status != cond.Status || old.Reason != cond.Reason
}

// Forget drops uid (the object is gone).
func (t *Transitions) Forget(uid types.UID) { t.last.Delete(uid) }
