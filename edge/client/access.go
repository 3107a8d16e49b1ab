package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// PutAccessPolicy creates or replaces a policy (PUT
// /v1/access-policies/{name}?owner=).
func (c *Client) PutAccessPolicy(ctx context.Context, p apiwire.AccessPolicy) (*apiwire.AccessPolicy, error) {
	var out apiwire.AccessPolicy
	return &out, c.do(ctx, http.MethodPut, "/v1/access-policies/"+url.PathEscape(p.Name)+ownerQuery(p.Owner), p, &out)
}

// GetAccessPolicy returns an owner's policy, without its secrets.
func (c *Client) GetAccessPolicy(ctx context.Context, owner, name string) (*apiwire.AccessPolicy, error) {
	var out apiwire.AccessPolicy
	return &out, c.do(ctx, http.MethodGet, "/v1/access-policies/"+url.PathEscape(name)+ownerQuery(owner), nil, &out)
}

// ListAccessPolicies lists the policies the key may see, of one owner
// when owner is set.
func (c *Client) ListAccessPolicies(ctx context.Context, owner string) ([]apiwire.AccessPolicy, error) {
	var out apiwire.List[apiwire.AccessPolicy]
	return out.Items, c.do(ctx, http.MethodGet, "/v1/access-policies"+ownerQuery(owner), nil, &out)
}

// DeleteAccessPolicy removes an owner's policy: the addresses it protects
// then refuse every request until it is back or detached.
func (c *Client) DeleteAccessPolicy(ctx context.Context, owner, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/access-policies/"+url.PathEscape(name)+ownerQuery(owner), nil, nil)
}

// SetDomainAccessPolicy puts the owner's access policy name on a
// reserved domain ("" detaches it), acting for owner.
func (c *Client) SetDomainAccessPolicy(ctx context.Context, domain, owner, policy string) (*apiwire.Domain, error) {
	var out apiwire.Domain
	body := apiwire.UpdateSharing{AccessPolicy: &policy}
	return &out, c.do(ctx, http.MethodPatch, "/v1/domains/"+url.PathEscape(domain)+ownerQuery(owner), body, &out)
}

// AccessJWKS returns the JSON Web Key Set that verifies the identity
// assertions (GET /v1/access/jwks, no key needed).
func (c *Client) AccessJWKS(ctx context.Context) (json.RawMessage, error) {
	var out json.RawMessage
	return out, c.do(ctx, http.MethodGet, "/v1/access/jwks", nil, &out)
}

// AccessKeys lists the access keys.
func (c *Client) AccessKeys(ctx context.Context) (*apiwire.AccessKeys, error) {
	var out apiwire.AccessKeys
	return &out, c.do(ctx, http.MethodGet, "/v1/access/keys", nil, &out)
}

// RotateAccessKeys makes new session and assertion keys the ones in use;
// the previous ones still open and verify until the next rotation.
func (c *Client) RotateAccessKeys(ctx context.Context) (*apiwire.AccessKeys, error) {
	var out apiwire.AccessKeys
	return &out, c.do(ctx, http.MethodPost, "/v1/access/keys/rotate", nil, &out)
}
