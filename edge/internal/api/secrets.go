package api

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/internal/auth"
	"code.tuna.am/tuna/k8s-operator/edge/internal/secrets"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
)

// MaxSecretsWait caps the wait of a long-polling list.
const MaxSecretsWait = 60 * time.Second

// pollSlack is how much longer than its wait a long poll may take to
// answer: its write deadline is the wait plus this.
const pollSlack = 15 * time.Second

func secretInfo(m store.SecretMeta) apiwire.SecretInfo {
	keys := m.Keys
	if keys == nil {
		keys = []string{}
	}
	return apiwire.SecretInfo{Name: m.Name, Version: m.Version, Keys: keys, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}
}

// secretName validates the name in the path.
func secretName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if err := secrets.CheckName(name); err != nil {
		return "", fail(http.StatusBadRequest, apiwire.CodeInvalidRequest, "%v", err)
	}
	return name, nil
}

// outsidePrefix refuses a write outside the key's secret prefix. The
// answer depends on the name alone, so it reveals nothing about which
// secrets exist.
func outsidePrefix(p *auth.Principal, name string) error {
	return fail(http.StatusForbidden, apiwire.CodeForbidden,
		"API key %s may only use secrets whose names start with %q; %q does not", p.ID, p.SecretPrefix, name)
}

func (s *Server) putSecret(r *http.Request, p *auth.Principal) (int, any, error) {
	name, err := secretName(r)
	if err != nil {
		return 0, nil, err
	}
	if !p.MaySeeSecret(name) {
		return 0, nil, outsidePrefix(p, name)
	}
	var in apiwire.PutSecret
	if err := decode(r, &in); err != nil {
		return 0, nil, err
	}
	if err := secrets.CheckData(in.Data); err != nil {
		var tl *secrets.TooLargeError
		if errors.As(err, &tl) {
			return 0, nil, fail(http.StatusRequestEntityTooLarge, apiwire.CodeTooLarge, "%v", err)
		}
		return 0, nil, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest, "%v", err)
	}
	if in.ExpectedVersion != nil && *in.ExpectedVersion < 0 {
		return 0, nil, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
			"expected_version %d: use 0 (must not exist) or the version the secret must be at", *in.ExpectedVersion)
	}
	meta, created, err := s.cfg.Secrets.Put(name, in.Data, in.ExpectedVersion)
	var vc *secrets.VersionConflictError
	var le *secrets.LimitError
	switch {
	case errors.As(err, &vc):
		return 0, nil, fail(http.StatusConflict, apiwire.CodeVersionConflict, "%v", vc)
	case errors.As(err, &le):
		return 0, nil, fail(http.StatusConflict, apiwire.CodeLimitExceeded, "%v", le)
	case err != nil:
		return 0, nil, fmt.Errorf("storing secret: %w", err)
	}
	if created {
		return http.StatusCreated, secretInfo(meta), nil
	}
	return http.StatusOK, secretInfo(meta), nil
}

func (s *Server) getSecret(r *http.Request, p *auth.Principal) (int, any, error) {
	name, err := secretName(r)
	if err != nil {
		return 0, nil, err
	}
	// Outside the prefix reads as absent: a confined key learns nothing
	// about other secrets.
	if !p.MaySeeSecret(name) {
		return 0, nil, notFound("secret", name)
	}
	meta, data, err := s.cfg.Secrets.Get(name)
	if secrets.IsNotFound(err) {
		return 0, nil, notFound("secret", name)
	} else if err != nil {
		return 0, nil, fmt.Errorf("reading secret: %w", err)
	}
	return http.StatusOK, apiwire.Secret{SecretInfo: secretInfo(meta), Data: data}, nil
}

func (s *Server) deleteSecret(r *http.Request, p *auth.Principal) (int, any, error) {
	name, err := secretName(r)
	if err != nil {
		return 0, nil, err
	}
	if !p.MaySeeSecret(name) {
		return 0, nil, outsidePrefix(p, name)
	}
	if err := s.cfg.Secrets.Delete(name); secrets.IsNotFound(err) {
		return 0, nil, notFound("secret", name)
	} else if err != nil {
		return 0, nil, fmt.Errorf("deleting secret: %w", err)
	}
	return http.StatusNoContent, nil, nil
}

// listSecrets lists the secrets the key may see under ?prefix=, with an
// ETag of exactly that list. With If-None-Match and ?wait=, it is a long
// poll: it holds the request until the list's ETag differs (200) or the
// wait ends (304). Every write wakes it; it then lists again, so a change
// the key cannot see keeps it waiting.
func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request, p *auth.Principal) (int, any, error) {
	q := r.URL.Query()
	wait, err := parseWait(q.Get("wait"))
	if err != nil {
		return 0, nil, err
	}
	prefix, ok := visiblePrefix(p.SecretPrefix, q.Get("prefix"))
	inm := strings.TrimPrefix(strings.TrimSpace(r.Header.Get("If-None-Match")), "W/")
	var timeout <-chan time.Time
	if wait > 0 && inm != "" {
		// The server's write timeout (30 s by default) runs from the end
		// of the request headers and would cut a long poll short, over
		// HTTP/1.1 and HTTP/2 alike: this request gets a deadline of its
		// own. (The read timeout does not matter: the request has no body
		// left to read.)
		deadline := time.Now().Add(wait + pollSlack)
		if err := http.NewResponseController(w).SetWriteDeadline(deadline); err != nil {
			s.log.Debug("cannot extend the write deadline of a long poll", "err", err)
		}
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
		s.m.SecretWatch(1)
		defer s.m.SecretWatch(-1)
	}
	for {
		// Taken before listing, so a write between the list and the wait
		// still wakes this request.
		changed := s.cfg.Secrets.Changed()
		out := apiwire.SecretList{Items: []apiwire.SecretInfo{}}
		if ok {
			metas, err := s.cfg.Secrets.List(prefix)
			if err != nil {
				return 0, nil, fmt.Errorf("listing secrets: %w", err)
			}
			for _, m := range metas {
				out.Items = append(out.Items, secretInfo(m))
			}
		}
		etag := listETag(out.Items)
		w.Header().Set("ETag", etag)
		if inm != etag {
			return http.StatusOK, out, nil
		}
		if timeout == nil {
			return http.StatusNotModified, nil, nil
		}
		select {
		case <-changed:
		case <-timeout:
			return http.StatusNotModified, nil, nil
		case <-s.closing:
			return http.StatusNotModified, nil, nil
		case <-r.Context().Done():
			return http.StatusNotModified, nil, nil
		}
	}
}

// parseWait reads ?wait= ("30s", or bare seconds), capped at
// MaxSecretsWait.
func parseWait(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		n, nerr := strconv.Atoi(v)
		if nerr != nil {
			return 0, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest, "wait %q: want a duration such as 30s (at most %s)", v, MaxSecretsWait)
		}
		d = time.Duration(n) * time.Second
	}
	if d < 0 {
		return 0, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest, "wait %q must not be negative", v)
	}
	return min(d, MaxSecretsWait), nil
}

// visiblePrefix combines the key's prefix and the query's: the longer one
// when one extends the other, else nothing is visible (ok false).
func visiblePrefix(keyPrefix, query string) (string, bool) {
	switch {
	case strings.HasPrefix(query, keyPrefix):
		return query, true
	case strings.HasPrefix(keyPrefix, query):
		return keyPrefix, true
	}
	return "", false
}

// listETag hashes the names and versions of a list, and creation times:
// a secret deleted and created again restarts at version 1, and must not
// look unchanged to a client that saw the old one.
func listETag(items []apiwire.SecretInfo) string {
	h := sha256.New()
	for _, it := range items {
		fmt.Fprintf(h, "%s\x00%d\x00%d\n", it.Name, it.Version, it.CreatedAt.UnixNano())
	}
	return etagOf(h)
}

// etagOf is the ETag of what h has hashed.
func etagOf(h hash.Hash) string { return `"` + hex.EncodeToString(h.Sum(nil)[:16]) + `"` }
