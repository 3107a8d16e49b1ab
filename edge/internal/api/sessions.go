package api

import (
	"net/http"
	"strconv"
	"strings"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/internal/auth"
	"code.tuna.am/tuna/k8s-operator/edge/internal/registry"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
)

// listSessions lists the live sessions of the tunnel keys the caller may see
// whose labels match every label=k=v filter; with since=<cursor> of an
// earlier answer, only the sessions that began or ended after it. What
// checks sessions every few seconds (the operator's check of its agents'
// entries) then costs the edge, and the caller's budget, one call for
// what changed, however many sessions there are. A cursor the edge can no
// longer follow (too old, or from before a restart) is answered with
// every live session, Full.
func (s *Server) listSessions(r *http.Request, p *auth.Principal) (int, any, error) {
	q := r.URL.Query()
	want, err := labelFilter(q)
	if err != nil {
		return 0, nil, err
	}
	a := actor{p: p}
	visible := func(c registry.SessionChange) bool {
		return c.Tunnel && matches(c.Labels, want) && a.mayTouchKey(store.TunnelKey{ID: c.KeyID, Owner: c.Owner}) == nil
	}
	out := apiwire.SessionChanges{Items: []apiwire.SessionChange{}}
	var changes []registry.SessionChange
	var last uint64
	followed := false
	if since := q.Get("since"); since != "" {
		seq, err := s.parseCursor(since)
		if err != nil {
			return 0, nil, err
		}
		if seq >= 0 {
			changes, last, followed = s.reg.ChangesSince(uint64(seq))
		}
	}
	if !followed {
		changes, last = s.reg.LiveSessions()
		out.Full = true
	}
	for _, c := range changes {
		if visible(c) {
			out.Items = append(out.Items, apiwire.SessionChange{KeyID: c.KeyID, ID: c.SessionID, Ended: c.Ended})
		}
	}
	out.Cursor = s.reg.Run() + "." + strconv.FormatUint(last, 10)
	return http.StatusOK, out, nil
}

// parseCursor reads a cursor "<run>.<number>": the number, or -1 for a
// cursor of another run of the edge (answered in full).
func (s *Server) parseCursor(c string) (int64, error) {
	run, n, ok := strings.Cut(c, ".")
	seq, err := strconv.ParseInt(n, 10, 64)
	if !ok || run == "" || err != nil || seq < 0 {
		return 0, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
			"since %q is not a cursor of GET /v1/sessions: send back the cursor of an earlier answer, or none", c)
	}
	if run != s.reg.Run() {
		return -1, nil
	}
	return seq, nil
}
