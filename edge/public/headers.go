package public

import (
	"net"
	"net/http"

	"code.tuna.am/tuna/k8s-operator/internal/httprule"
)

// setForwarded writes the forwarding headers: the values are ours, never
// appended to what a client sent, so a client cannot spoof its address.
// It drops the client's identity fields too (httprule.EdgeWritten): only
// an access policy's login sets them, after this.
func setForwarded(h http.Header, host string, cs *connState) {
	ip, _, err := net.SplitHostPort(cs.remote)
	if err != nil {
		ip = cs.remote
	}
	for _, name := range httprule.EdgeFields() {
		h.Del(name)
	}
	h.Set(httprule.ForwardedFor, ip)
	h.Set(httprule.ForwardedHost, host)
	h.Set(httprule.ForwardedProto, cs.scheme)
}
