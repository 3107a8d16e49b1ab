package client

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// PutSecret creates a secret or replaces its data, and returns it without
// its values.
func (c *Client) PutSecret(ctx context.Context, name string, in apiwire.PutSecret) (*apiwire.SecretInfo, error) {
	var out apiwire.SecretInfo
	return &out, c.do(ctx, http.MethodPut, "/v1/secrets/"+secretPath(name), in, &out)
}

// GetSecret returns a secret with its values.
func (c *Client) GetSecret(ctx context.Context, name string) (*apiwire.Secret, error) {
	var out apiwire.Secret
	return &out, c.do(ctx, http.MethodGet, "/v1/secrets/"+secretPath(name), nil, &out)
}

// DeleteSecret deletes a secret.
func (c *Client) DeleteSecret(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/secrets/"+secretPath(name), nil, nil)
}

// ListSecrets lists the secrets whose names start with prefix ("" for all
// the key may see), without values.
func (c *Client) ListSecrets(ctx context.Context, prefix string) (*apiwire.SecretList, error) {
	return c.WatchSecrets(ctx, prefix, "", 0)
}

// WatchSecrets is a long poll: with etag from an earlier list, the edge
// holds the request for up to wait until the list differs from that one
// (a secret created, changed or deleted), then answers with the new list.
// When nothing changed within wait, it returns (nil, nil): the caller asks
// again with the same etag. With etag "" or wait 0 it lists at once. The
// edge caps wait at 60 seconds.
func (c *Client) WatchSecrets(ctx context.Context, prefix, etag string, wait time.Duration) (*apiwire.SecretList, error) {
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
	var out apiwire.SecretList
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
