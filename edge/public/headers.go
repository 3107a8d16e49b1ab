package public

import (
	"net"
	"net/http"
)

// setForwarded writes the forwarding headers: the values are ours, never
// appended to what a client sent, so a client cannot spoof its address.
func setForwarded(h http.Header, host string, cs *connState) {
	ip, _, err := net.SplitHostPort(cs.remote)
	if err != nil {
		ip = cs.remote
	}
	// A client-supplied RFC 7239 header would contradict ours.
	h.Del("Forwarded")
	h.Set("X-Forwarded-For", ip)
	h.Set("X-Forwarded-Host", host)
	h.Set("X-Forwarded-Proto", cs.scheme)
}
