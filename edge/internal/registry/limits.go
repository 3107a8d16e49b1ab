package registry

import (
	"fmt"
	"sync/atomic"

	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

// LimitError is a refusal by one of the edge's limits. Its text starts with
// the stable code limit_exceeded and names the limit and its value, so a
// user can tell which setting to raise.
type LimitError struct {
	// Limit is one of the metrics.Limit* names.
	Limit string
	Value int
	// What says what was refused.
	What string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s: %s (limit %s=%d)", protocol.CodeLimitExceeded, e.What, e.Limit, e.Value)
}

// Slots counts concurrent uses of something limited. The zero value is
// ready; it never blocks, so a caller over the limit is refused at once.
type Slots struct{ n atomic.Int64 }

// Take takes a slot unless max are in use; max <= 0 means no limit.
func (s *Slots) Take(max int) bool {
	if s.n.Add(1) > int64(max) && max > 0 {
		s.n.Add(-1)
		return false
	}
	return true
}

// Put gives back a slot taken by Take.
func (s *Slots) Put() { s.n.Add(-1) }

// InUse is the number of slots taken.
func (s *Slots) InUse() int { return int(s.n.Load()) }
