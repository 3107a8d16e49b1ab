package client

import (
	"context"
	"net/http"
	"net/url"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// PutCertificate stores host's own certificate, acting for owner, who
// must hold the host (its Domain's owner, or the owner whose keys claimed
// it).
func (c *Client) PutCertificate(ctx context.Context, host, owner string, in apiwire.PutCertificate) (*apiwire.Certificate, error) {
	var out apiwire.Certificate
	return &out, c.do(ctx, http.MethodPut, "/v1/certificates/"+url.PathEscape(host)+ownerQuery(owner), in, &out)
}

// GetCertificate reads what the edge holds of host's own certificate.
func (c *Client) GetCertificate(ctx context.Context, host, owner string) (*apiwire.Certificate, error) {
	var out apiwire.Certificate
	return &out, c.do(ctx, http.MethodGet, "/v1/certificates/"+url.PathEscape(host)+ownerQuery(owner), nil, &out)
}

// DeleteCertificate removes host's own certificate, acting for owner: the
// host is served with the edge's certificates again.
func (c *Client) DeleteCertificate(ctx context.Context, host, owner string) error {
	return c.do(ctx, http.MethodDelete, "/v1/certificates/"+url.PathEscape(host)+ownerQuery(owner), nil, nil)
}
