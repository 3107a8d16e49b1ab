// Package client is the Go client of the tuna-edge control API. The operator
// and the tuna-operator CLI use it; nothing else talks to the API.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// Client calls the control API with one API key.
type Client struct {
	baseURL string
	apiKey  string
	// keySource, when set, is asked for the key on every call instead of
	// apiKey (see WithKeySource).
	keySource func() string
	http      *http.Client
	trust     *Trust
	// err is a configuration error every call returns (see WithTrust).
	err error
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient replaces the default HTTP client (for custom TLS roots).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithKeySource makes every call ask key() for the API key to send, instead
// of using the key given to New. A caller whose key rotates while it runs
// (a mounted Secret that changes) swaps the key there, and every user of the
// Client picks it up on its next call; key must be safe for concurrent use
// and cheap, as it runs once per request.
func WithKeySource(key func() string) Option { return func(c *Client) { c.keySource = key } }

// New returns a client of the API at baseURL (e.g. "https://edge.example:8443").
func New(baseURL, apiKey string, opts ...Option) *Client {
	c := &Client{
		baseURL: strings.TrimRight(baseURL, "/"),
		apiKey:  apiKey,
		http:    &http.Client{Timeout: 30 * time.Second},
	}
	for _, o := range opts {
		o(c)
	}
	if c.trust != nil {
		c.err = c.applyTrust(*c.trust)
	}
	return c
}

func (c *Client) applyTrust(t Trust) error {
	if t.IsZero() {
		return nil
	}
	if !strings.HasPrefix(strings.ToLower(c.baseURL), "https://") {
		return fmt.Errorf("edge API URL %q: a pinned fingerprint or CA bundle needs an https:// URL", c.baseURL)
	}
	tr, err := t.Transport()
	if err != nil {
		return err
	}
	c.http = &http.Client{Timeout: c.http.Timeout, Transport: tr}
	return nil
}

// Edge returns the edge's public facts, including the SSH host key to pin.
func (c *Client) Edge(ctx context.Context) (*apiwire.EdgeInfo, error) {
	var out apiwire.EdgeInfo
	return &out, c.do(ctx, http.MethodGet, "/v1/edge", nil, &out)
}

// Nodes lists the edge's live nodes (one for a single edge).
func (c *Client) Nodes(ctx context.Context) ([]apiwire.Node, error) {
	var out apiwire.List[apiwire.Node]
	return out.Items, c.do(ctx, http.MethodGet, "/v1/nodes", nil, &out)
}

// WhoAmI describes the calling key.
func (c *Client) WhoAmI(ctx context.Context) (*apiwire.WhoAmI, error) {
	var out apiwire.WhoAmI
	return &out, c.do(ctx, http.MethodGet, "/v1/whoami", nil, &out)
}

// CreateAPIKey creates an API key; the response carries the secret once.
func (c *Client) CreateAPIKey(ctx context.Context, in apiwire.CreateAPIKey) (*apiwire.APIKey, error) {
	var out apiwire.APIKey
	return &out, c.do(ctx, http.MethodPost, "/v1/api-keys", in, &out)
}

// ListAPIKeys lists API keys (never their secrets).
func (c *Client) ListAPIKeys(ctx context.Context) ([]apiwire.APIKey, error) {
	var out apiwire.List[apiwire.APIKey]
	return out.Items, c.do(ctx, http.MethodGet, "/v1/api-keys", nil, &out)
}

// DeleteAPIKey revokes an API key.
func (c *Client) DeleteAPIKey(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/api-keys/"+url.PathEscape(id), nil, nil)
}

// CreateTunnelKey issues a tunnel key; the response carries the secret once.
func (c *Client) CreateTunnelKey(ctx context.Context, in apiwire.CreateTunnelKey) (*apiwire.TunnelKey, error) {
	var out apiwire.TunnelKey
	return &out, c.do(ctx, http.MethodPost, "/v1/tunnel-keys", in, &out)
}

// ListTunnelKeys lists tunnel keys whose labels include every given label.
func (c *Client) ListTunnelKeys(ctx context.Context, labels map[string]string) ([]apiwire.TunnelKey, error) {
	var out apiwire.List[apiwire.TunnelKey]
	return out.Items, c.do(ctx, http.MethodGet, "/v1/tunnel-keys"+labelQuery(labels), nil, &out)
}

// ListTunnelKeysPage reads one page of the tunnel keys, in id order; see
// KeyPageRequest.
func (c *Client) ListTunnelKeysPage(ctx context.Context, in apiwire.KeyPageRequest) (*apiwire.KeyPage, error) {
	q := url.Values{}
	for _, k := range slices.Sorted(maps.Keys(in.Labels)) {
		q.Add("label", k+"="+in.Labels[k])
	}
	q.Set("limit", strconv.Itoa(in.Limit))
	if in.After != "" {
		q.Set("after", in.After)
	}
	var hdr http.Header
	if in.IfNoneMatch != "" {
		hdr = http.Header{"If-None-Match": {in.IfNoneMatch}}
	}
	var out apiwire.List[apiwire.TunnelKey]
	ans, err := c.doWith(ctx, http.MethodGet, "/v1/tunnel-keys?"+q.Encode(), hdr, 0, nil, &out)
	if err != nil {
		return nil, err
	}
	return &apiwire.KeyPage{Items: out.Items, Next: out.Next, ETag: ans.header.Get("ETag"),
		NotModified: ans.status == http.StatusNotModified}, nil
}

// SessionChanges lists the live sessions of the keys whose labels include
// labels; with since, the cursor of an earlier answer, the sessions that
// began or ended after it (an answer in Full when the edge no longer
// follows that cursor).
func (c *Client) SessionChanges(ctx context.Context, labels map[string]string, since string) (*apiwire.SessionChanges, error) {
	q := url.Values{}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		q.Add("label", k+"="+labels[k])
	}
	if since != "" {
		q.Set("since", since)
	}
	var out apiwire.SessionChanges
	return &out, c.do(ctx, http.MethodGet, "/v1/sessions?"+q.Encode(), nil, &out)
}

// CreateTunnelKeys issues up to apiwire.MaxBatch tunnel keys in one call; the
// results are in the order of in, each with its key (and secret) or its
// refusal (apiwire.TunnelKeyResult.Err).
func (c *Client) CreateTunnelKeys(ctx context.Context, in []apiwire.CreateTunnelKey) ([]apiwire.TunnelKeyResult, error) {
	var out apiwire.List[apiwire.TunnelKeyResult]
	return out.Items, c.do(ctx, http.MethodPost, "/v1/tunnel-keys/batch", apiwire.CreateTunnelKeys{Items: in}, &out)
}

// RenewTunnelKeys renews up to apiwire.MaxBatch tunnel keys in one call; the
// results are in the order of ids.
func (c *Client) RenewTunnelKeys(ctx context.Context, ids []string) ([]apiwire.TunnelKeyResult, error) {
	var out apiwire.List[apiwire.TunnelKeyResult]
	return out.Items, c.do(ctx, http.MethodPost, "/v1/tunnel-keys/renew", apiwire.RenewTunnelKeys{IDs: ids}, &out)
}

// GetTunnelKey returns one tunnel key.
func (c *Client) GetTunnelKey(ctx context.Context, id string) (*apiwire.TunnelKey, error) {
	var out apiwire.TunnelKey
	return &out, c.do(ctx, http.MethodGet, "/v1/tunnel-keys/"+url.PathEscape(id), nil, &out)
}

// RevokeTunnelKey deletes a tunnel key and ends its live session at once.
func (c *Client) RevokeTunnelKey(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/tunnel-keys/"+url.PathEscape(id), nil, nil)
}

// CreateDomain reserves a subdomain or a custom domain.
func (c *Client) CreateDomain(ctx context.Context, in apiwire.CreateDomain) (*apiwire.Domain, error) {
	var out apiwire.Domain
	return &out, c.do(ctx, http.MethodPost, "/v1/domains", in, &out)
}

// ListDomains lists reserved domains.
func (c *Client) ListDomains(ctx context.Context) ([]apiwire.Domain, error) {
	var out apiwire.List[apiwire.Domain]
	return out.Items, c.do(ctx, http.MethodGet, "/v1/domains", nil, &out)
}

// GetDomain returns a reserved domain by full host name.
func (c *Client) GetDomain(ctx context.Context, name string) (*apiwire.Domain, error) {
	var out apiwire.Domain
	return &out, c.do(ctx, http.MethodGet, "/v1/domains/"+url.PathEscape(name), nil, &out)
}

// RenewTunnelKey extends a tunnel key's expiry by the edge's TTL. An
// already expired key is refused with code key_expired.
func (c *Client) RenewTunnelKey(ctx context.Context, id string) (*apiwire.TunnelKey, error) {
	var out apiwire.TunnelKey
	return &out, c.do(ctx, http.MethodPost, "/v1/tunnel-keys/"+url.PathEscape(id)+"/renew", nil, &out)
}

// VerifyDomain re-runs the DNS check of a custom domain, acting for owner
// (see DeleteDomain).
func (c *Client) VerifyDomain(ctx context.Context, name, owner string) (*apiwire.Domain, error) {
	var out apiwire.Domain
	return &out, c.do(ctx, http.MethodPost, "/v1/domains/"+url.PathEscape(name)+"/verify"+ownerQuery(owner), nil, &out)
}

// DeleteDomain releases a reserved domain, acting for owner: the edge
// refuses (403 address_owned) to release a domain another owner holds.
// "" acts as the key itself: a full key releases any domain, a key bound
// to an owner prefix any domain of an owner under it, another key only
// unowned ones.
func (c *Client) DeleteDomain(ctx context.Context, name, owner string) error {
	return c.do(ctx, http.MethodDelete, "/v1/domains/"+url.PathEscape(name)+ownerQuery(owner), nil, nil)
}

// TransferOwners hands every reservation and claim of the owners under
// from to the same owners under to; it needs a full key.
func (c *Client) TransferOwners(ctx context.Context, from, to string) (*apiwire.OwnerTransferResult, error) {
	var out apiwire.OwnerTransferResult
	return &out, c.do(ctx, http.MethodPost, "/v1/owner-transfers", apiwire.OwnerTransfer{From: from, To: to}, &out)
}

// CreateTCPEndpoint reserves a port for an alias.
func (c *Client) CreateTCPEndpoint(ctx context.Context, in apiwire.CreateTCPEndpoint) (*apiwire.TCPEndpoint, error) {
	var out apiwire.TCPEndpoint
	return &out, c.do(ctx, http.MethodPost, "/v1/tcp-endpoints", in, &out)
}

// ListTCPEndpoints lists reserved TCP endpoints.
func (c *Client) ListTCPEndpoints(ctx context.Context) ([]apiwire.TCPEndpoint, error) {
	var out apiwire.List[apiwire.TCPEndpoint]
	return out.Items, c.do(ctx, http.MethodGet, "/v1/tcp-endpoints", nil, &out)
}

// GetTCPEndpoint returns a reserved TCP endpoint by alias.
func (c *Client) GetTCPEndpoint(ctx context.Context, alias string) (*apiwire.TCPEndpoint, error) {
	var out apiwire.TCPEndpoint
	return &out, c.do(ctx, http.MethodGet, "/v1/tcp-endpoints/"+url.PathEscape(alias), nil, &out)
}

// DeleteTCPEndpoint releases a reserved TCP endpoint, acting for owner
// (see DeleteDomain).
func (c *Client) DeleteTCPEndpoint(ctx context.Context, alias, owner string) error {
	return c.do(ctx, http.MethodDelete, "/v1/tcp-endpoints/"+url.PathEscape(alias)+ownerQuery(owner), nil, nil)
}

// ShareDomain replaces the list of other owners allowed to use a domain,
// acting for owner (see DeleteDomain).
func (c *Client) ShareDomain(ctx context.Context, name, owner string, sharedWith []string) (*apiwire.Domain, error) {
	var out apiwire.Domain
	if sharedWith == nil {
		sharedWith = []string{} // null would read as "field missing"
	}
	body := apiwire.UpdateSharing{SharedWith: &sharedWith}
	return &out, c.do(ctx, http.MethodPatch, "/v1/domains/"+url.PathEscape(name)+ownerQuery(owner), body, &out)
}

// ShareTCPEndpoint replaces the list of other owners allowed to use a TCP
// endpoint, acting for owner (see DeleteDomain).
func (c *Client) ShareTCPEndpoint(ctx context.Context, alias, owner string, sharedWith []string) (*apiwire.TCPEndpoint, error) {
	var out apiwire.TCPEndpoint
	if sharedWith == nil {
		sharedWith = []string{} // null would read as "field missing"
	}
	body := apiwire.UpdateSharing{SharedWith: &sharedWith}
	return &out, c.do(ctx, http.MethodPatch, "/v1/tcp-endpoints/"+url.PathEscape(alias)+ownerQuery(owner), body, &out)
}

// ownerQuery names the owner a write acts for.
func ownerQuery(owner string) string {
	if owner == "" {
		return ""
	}
	return "?" + url.Values{"owner": {owner}}.Encode()
}

func labelQuery(labels map[string]string) string {
	if len(labels) == 0 {
		return ""
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	q := url.Values{}
	for _, k := range keys {
		q.Add("label", k+"="+labels[k])
	}
	return "?" + q.Encode()
}

// key is the API key to send now.
func (c *Client) key() string {
	if c.keySource != nil {
		return c.keySource()
	}
	return c.apiKey
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	_, err := c.doWith(ctx, method, path, nil, 0, in, out)
	return err
}

// answer is what a caller of doWith sees of a response, whose body doWith
// has read and closed.
type answer struct {
	status int
	header http.Header
}

// doWith makes one call with extra request headers. longPoll, when set, is
// how long the server may hold the request: the client's timeout is
// stretched by it. A 304 answer is returned as is, with no error.
func (c *Client) doWith(ctx context.Context, method, path string, hdr http.Header, longPoll time.Duration, in, out any) (*answer, error) {
	if c.err != nil {
		return nil, fmt.Errorf("edge API %s %s: %w", method, path, c.err)
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encoding %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, body)
	if err != nil {
		return nil, fmt.Errorf("building %s %s: %w", method, path, err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+c.key())
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.http
	if longPoll > 0 && hc.Timeout > 0 {
		stretched := *hc
		stretched.Timeout += longPoll
		hc = &stretched
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("edge API %s %s: %w", method, path, err)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	// A read-only body: closing it only releases the connection.
	_ = resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("edge API %s %s: reading response: %w", method, path, err)
	}
	ans := &answer{status: resp.StatusCode, header: resp.Header}
	if resp.StatusCode == http.StatusNotModified {
		return ans, nil
	}
	if resp.StatusCode >= 300 {
		ae := &apiwire.APIError{Status: resp.StatusCode}
		if json.Unmarshal(data, ae) != nil || ae.Code == "" {
			ae.Code = apiwire.CodeInternal
			ae.Message = strings.TrimSpace(string(data))
		}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
			ae.RetryAfter = time.Duration(s) * time.Second
		}
		return nil, ae
	}
	if out == nil || len(data) == 0 {
		return ans, nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return nil, fmt.Errorf("edge API %s %s: decoding response: %w", method, path, err)
	}
	return ans, nil
}
