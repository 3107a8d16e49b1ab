package ingress

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Notes remember, per Ingress, what was last reported about each subject
// (a rule, a path, a host), so that an event is recorded once per change
// and never again on a resync. Ingress has no conditions to compare with,
// and the informer cache could not be trusted for that anyway. A component
// that restarts reports each standing problem once more.
type Notes struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*noteSet
}

type noteSet struct {
	uid   types.UID
	notes map[string]string
}

func (n *Notes) set(obj metav1.Object) *noteSet {
	if n.m == nil {
		n.m = map[types.NamespacedName]*noteSet{}
	}
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	s := n.m[key]
	if s == nil || s.uid != obj.GetUID() { // new, or re-created under the same name
		s = &noteSet{uid: obj.GetUID(), notes: map[string]string{}}
		n.m[key] = s
	}
	return s
}

// Set records msg for subject and reports whether that is a change.
func (n *Notes) Set(obj metav1.Object, subject, msg string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.set(obj)
	old, ok := s.notes[subject]
	s.notes[subject] = msg
	return !ok || old != msg
}

// Get returns what was last recorded for subject.
func (n *Notes) Get(obj metav1.Object, subject string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	msg, ok := n.set(obj).notes[subject]
	return msg, ok
}

// Clear drops subject and reports whether it was recorded.
func (n *Notes) Clear(obj metav1.Object, subject string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.set(obj)
	_, ok := s.notes[subject]
	delete(s.notes, subject)
	return ok
}

// Prune drops the subjects of obj that start with prefix and are not in
// keep.
func (n *Notes) Prune(obj metav1.Object, prefix string, keep map[string]bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.set(obj)
	for subject := range s.notes {
		if strings.HasPrefix(subject, prefix) && !keep[subject] {
			delete(s.notes, subject)
		}
	}
}

// Forget drops everything recorded for the Ingress key (it is gone).
func (n *Notes) Forget(key types.NamespacedName) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.m, key)
}

// Action is the action of an event about subject with message msg. The
// events API merges events that share the object, reason and action into
// one series and keeps the first message only, so two skipped rules, or a
// route table and the next one, need actions of their own: the verb, the
// subject and a short hash of the message, within the API's 128 bytes.
func Action(verb, subject, msg string) string {
	sum := sha256.Sum256([]byte(subject + "\x00" + msg))
	tag := " " + hex.EncodeToString(sum[:4])
	a := verb + " " + subject
	if len(a)+len(tag) > 128 {
		a = a[:128-len(tag)]
	}
	return a + tag
}
