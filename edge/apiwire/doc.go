// Package apiwire is the wire format of the tuna-edge control API: the
// request and answer bodies, the scopes, the headers and the stable error
// codes ({"code","error","request_id"}). The API server (edge/internal/api) and its
// Go client (edge/client) both speak it, so neither imports the other.
package apiwire
