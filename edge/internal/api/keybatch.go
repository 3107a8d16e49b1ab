package api

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/internal/auth"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
)

// A cluster's controller keeps one key per tunnel, thousands of them. One
// call per key, at the per-key budget of the API, makes a cold start of
// 10,000 tunnels take many minutes, and one list per tunnel makes it
// quadratic. So keys are issued and renewed in batches, and the list is
// read in pages, with an ETag that lets a client that already holds it
// hear "not modified" instead of all of it again.

// createTunnelKeys issues up to client.MaxBatch keys, each checked as
// POST /v1/tunnel-keys checks it; one refused leaves the others issued.
func (s *Server) createTunnelKeys(w http.ResponseWriter, r *http.Request, p *auth.Principal) (int, any, error) {
	var in apiwire.CreateTunnelKeys
	if err := decode(r, &in); err != nil {
		return 0, nil, err
	}
	if err := checkBatch(len(in.Items), "items"); err != nil {
		return 0, nil, err
	}
	out := make([]apiwire.TunnelKeyResult, len(in.Items))
	var issues []store.Issue
	var secrets []string
	var at []int // the item of each issue
	for i, item := range in.Items {
		is, secret, err := s.newTunnelKey(p, item)
		if err != nil {
			out[i] = s.itemRefused(err, w)
			continue
		}
		issues, secrets, at = append(issues, is), append(secrets, secret), append(at, i)
	}
	for j, err := range s.st.IssueTunnelKeys(issues) {
		if err != nil {
			out[at[j]] = s.itemRefused(issueFailed(err), w)
			continue
		}
		k := s.tunnelKeyOut(issues[j].Key)
		k.Key = secrets[j]
		out[at[j]] = apiwire.TunnelKeyResult{Status: http.StatusCreated, Key: &k}
	}
	return http.StatusOK, apiwire.List[apiwire.TunnelKeyResult]{Items: out}, nil
}

// renewTunnelKeys renews up to client.MaxBatch keys, each as its own
// renew would be: an expired key stays expired (409 key_expired), a key
// the caller may not see is not found.
func (s *Server) renewTunnelKeys(w http.ResponseWriter, r *http.Request, p *auth.Principal) (int, any, error) {
	var in apiwire.RenewTunnelKeys
	if err := decode(r, &in); err != nil {
		return 0, nil, err
	}
	if err := checkBatch(len(in.IDs), "ids"); err != nil {
		return 0, nil, err
	}
	recs, errs := s.st.UpdateTunnelKeys(in.IDs, s.renewal(actor{p: p}))
	out := make([]apiwire.TunnelKeyResult, len(in.IDs))
	for i, err := range errs {
		switch {
		case errors.Is(err, store.ErrNotFound):
			out[i] = s.itemRefused(notFound("tunnel key", in.IDs[i]), w)
		case err != nil:
			out[i] = s.itemRefused(err, w)
		default:
			k := s.tunnelKeyOut(recs[i])
			out[i] = apiwire.TunnelKeyResult{Status: http.StatusOK, Key: &k}
		}
	}
	return http.StatusOK, apiwire.List[apiwire.TunnelKeyResult]{Items: out}, nil
}

func checkBatch(n int, field string) error {
	if n < 1 || n > apiwire.MaxBatch {
		return fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
			"%s must hold 1 to %d entries, got %d: split a larger batch", field, apiwire.MaxBatch, n)
	}
	return nil
}

// itemRefused is one batch item's refusal, as its own call would have
// been answered (under the batch's request id).
func (s *Server) itemRefused(err error, w http.ResponseWriter) apiwire.TunnelKeyResult {
	reqID := w.Header().Get("X-Request-Id")
	ae := s.refusal(err, "batch item", reqID)
	wire := ae.wire(reqID)
	return apiwire.TunnelKeyResult{Status: ae.status, Error: &wire}
}

// listTunnelKeys lists the keys the caller may see whose labels match
// every label=k=v filter, in id order. With limit=N it answers a page of
// at most N keys after the key id after=, and next names the last one
// when more follow. The first page (no after=) carries the ETag of the
// whole list; sent back in If-None-Match, it is answered 304 while
// nothing in the list changed, its live sessions included.
func (s *Server) listTunnelKeys(w http.ResponseWriter, r *http.Request, p *auth.Principal) (int, any, error) {
	q := r.URL.Query()
	want, err := labelFilter(q)
	if err != nil {
		return 0, nil, err
	}
	limit := 0
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > apiwire.MaxPage {
			return 0, nil, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest, "limit %q must be 1 to %d", l, apiwire.MaxPage)
		}
		limit = n
	}
	after := q.Get("after")
	if after != "" && limit == 0 {
		return 0, nil, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest, "after= pages a list asked for with limit=")
	}
	a := actor{p: p}
	visible := func(rec store.TunnelKey) bool { return matches(rec.Labels, want) && a.mayTouchKey(rec) == nil }
	if after != "" {
		page, err := s.keyPageAfter(after, limit, visible)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, page, nil
	}
	// The first page needs every key, for the ETag of the whole list.
	recs, err := s.st.ListTunnelKeys()
	if err != nil {
		return 0, nil, fmt.Errorf("listing tunnel keys: %w", err)
	}
	items := []apiwire.TunnelKey{}
	for _, rec := range recs {
		if visible(rec) {
			items = append(items, s.tunnelKeyOut(rec))
		}
	}
	tag, err := keyListETag(items)
	if err != nil {
		return 0, nil, err
	}
	w.Header().Set("ETag", tag)
	if matchesETag(r.Header.Get("If-None-Match"), tag) {
		return http.StatusNotModified, nil, nil
	}
	out := apiwire.List[apiwire.TunnelKey]{Items: items}
	if limit > 0 && len(items) > limit {
		out.Items, out.Next = items[:limit], items[limit-1].ID
	}
	return http.StatusOK, out, nil
}

// keyPageAfter is a later page: the store is read from after on, as far
// as the page and one key more, so reading a list of N keys in pages
// reads each key about once, not once per page.
func (s *Server) keyPageAfter(after string, limit int, visible func(store.TunnelKey) bool) (apiwire.List[apiwire.TunnelKey], error) {
	out := apiwire.List[apiwire.TunnelKey]{Items: []apiwire.TunnelKey{}}
	err := s.st.ScanTunnelKeys(after, func(rec store.TunnelKey) bool {
		if !visible(rec) {
			return true
		}
		if len(out.Items) == limit {
			out.Next = out.Items[limit-1].ID
			return false
		}
		out.Items = append(out.Items, s.tunnelKeyOut(rec))
		return true
	})
	if err != nil {
		return out, fmt.Errorf("listing tunnel keys: %w", err)
	}
	return out, nil
}

// labelFilter reads the label=k=v filters of a list.
func labelFilter(q url.Values) (map[string]string, error) {
	want := map[string]string{}
	for _, l := range q["label"] {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return nil, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest, "label filter %q must be key=value", l)
		}
		want[k] = v
	}
	return want, nil
}

// keyListETag is a strong validator of a list of keys: a hash of what it
// says.
func keyListETag(items []apiwire.TunnelKey) (string, error) {
	h := sha256.New()
	enc := json.NewEncoder(h)
	for _, k := range items {
		if err := enc.Encode(k); err != nil {
			return "", fmt.Errorf("hashing the key list: %w", err)
		}
	}
	return etagOf(h), nil
}

// matchesETag reports whether an If-None-Match header names tag (a weak
// form of it included, as RFC 9110 compares for GET).
func matchesETag(header, tag string) bool {
	for c := range strings.SplitSeq(header, ",") {
		c = strings.TrimPrefix(strings.TrimSpace(c), "W/")
		if c == tag || c == "*" {
			return true
		}
	}
	return false
}
