package public

import (
	"net"
	"net/http"

	"code.tuna.am/tuna/k8s-operator/internal/httprule"
)

// dropEdgeFields drops what a client sent under the names of the fields
// the edge writes itself (httprule.EdgeWritten): the forwarding fields,
// which setForwarded writes, and the identity fields, which only an
// access policy's login sets, after this.
func dropEdgeFields(h http.Header) {
	for _, name := range httprule.EdgeFields() {
		h.Del(name)
	}
}

// setForwarded writes the forwarding headers: the values are ours, never
// appended to what a client sent, so a client cannot spoof its address.
func setForwarded(h http.Header, host string, cs *connState) {
	ip, _, err := net.SplitHostPort(cs.remote)
	if err != nil {
		ip = cs.remote
	}
	for _, name := range httprule.ForwardedFields() {
		h.Del(name)
	}
	h.Set(httprule.ForwardedFor, ip)
	h.Set(httprule.ForwardedHost, host)
	h.Set(httprule.ForwardedProto, cs.scheme)
}
