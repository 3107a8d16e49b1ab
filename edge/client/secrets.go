package client

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Scopes of the secrets API. A full key holds both; a tunnel key and a
// tunnels:write key hold neither.
const (
	// ScopeSecretsRead lists secrets and reads their values.
	ScopeSecretsRead = "secrets:read"
	// ScopeSecretsWrite creates, replaces and deletes secrets (it does not
	// read values: pair it with secrets:read for that).
	ScopeSecretsWrite = "secrets:write"
)

// Error codes of the secrets API.
const (
	// CodeVersionConflict: PUT with expected_version found another version.
	CodeVersionConflict = "version_conflict"
	// CodeSecretsDisabled: the edge has no encryption key for secrets.
	CodeSecretsDisabled = "secrets_disabled"
	// CodeLimitExceeded: a configured limit of the edge was reached.
	CodeLimitExceeded = "limit_exceeded"
)

// SecretInfo is a secret without its values: what lists return. Version
// starts at 1 and grows by one with every change of the data; a PUT of
// the same data changes nothing.
type SecretInfo struct {
	Name    string `json:"name"`
	Version int64  `json:"version"`
	// Keys are the names of the secret's values, sorted.
	Keys      []string  `json:"keys"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Secret is a secret with its values (GET /v1/secrets/{name}).
type Secret struct {
	SecretInfo
	// Data maps key names (as in a Kubernetes Secret: letters, digits,
	// '-', '_', '.') to values; base64 in JSON.
	Data map[string][]byte `json:"data"`
}

// PutSecret is the body of PUT /v1/secrets/{name}: it creates the secret
// or replaces all of its data.
type PutSecret struct {
	Data map[string][]byte `json:"data"`
	// ExpectedVersion, when set, makes the write conditional: the secret
	// must be at this version (0: must not exist yet), or the answer is
	// 409 version_conflict.
	ExpectedVersion *int64 `json:"expected_version,omitempty"`
}

// SecretList is GET /v1/secrets: the secrets the key may see, sorted by
// name, and an ETag of exactly this list (names and versions).
type SecretList struct {
	Items []SecretInfo `json:"items"`
	// ETag is the response's ETag header; pass it to WatchSecrets.
	ETag string `json:"-"`
}

// PutSecret creates a secret or replaces its data, and returns it without
// its values.
func (c *Client) PutSecret(ctx context.Context, name string, in PutSecret) (*SecretInfo, error) {
	var out SecretInfo
	return &out, c.do(ctx, http.MethodPut, "/v1/secrets/"+secretPath(name), in, &out)
}

// GetSecret returns a secret with its values.
func (c *Client) GetSecret(ctx context.Context, name string) (*Secret, error) {
	var out Secret
	return &out, c.do(ctx, http.MethodGet, "/v1/secrets/"+secretPath(name), nil, &out)
}

// DeleteSecret deletes a secret.
func (c *Client) DeleteSecret(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/secrets/"+secretPath(name), nil, nil)
}

// ListSecrets lists the secrets whose names start with prefix ("" for all
// the key may see), without values.
func (c *Client) ListSecrets(ctx context.Context, prefix string) (*SecretList, error) {
	return c.WatchSecrets(ctx, prefix, "", 0)
}

// WatchSecrets is a long poll: with etag from an earlier list, the edge
// holds the request for up to wait until the list differs from that one
// (a secret created, changed or deleted), then answers with the new list.
// When nothing changed within wait, it returns (nil, nil): the caller asks
// again with the same etag. With etag "" or wait 0 it lists at once. The
// edge caps wait at 60 seconds.
func (c *Client) WatchSecrets(ctx context.Context, prefix, etag string, wait time.Duration) (*SecretList, error) {
	q := url.Values{}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	hdr := http.Header{}
	if etag != "" && wait > 0 {
		// Whole seconds, rounded up: a wait under one second sent as
		// "0s" would answer at once, and a caller's loop would spin.
		q.Set("wait", fmt.Sprintf("%ds", int(math.Ceil(wait.Seconds()))))
		hdr.Set("If-None-Match", etag)
	}
	path := "/v1/secrets"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out SecretList
	ans, err := c.doWith(ctx, http.MethodGet, path, hdr, wait, nil, &out)
	if err != nil {
		return nil, err
	}
	if ans.status == http.StatusNotModified {
		return nil, nil
	}
	out.ETag = ans.header.Get("ETag")
	return &out, nil
}

// secretPath escapes each '/'-separated part of a secret name, so names
// with slashes (team-a/db) keep them in the URL path.
func secretPath(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}
