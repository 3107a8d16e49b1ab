package proxy

import (
	"net"
	"net/http"
	"time"
)

// SchemeH2C marks an upstream that speaks HTTP/2 without TLS (prior
// knowledge), such as a gRPC server: an Ingress backend whose Service port
// has appProtocol kubernetes.io/h2c.
const SchemeH2C = "h2c"

// h2cTransport speaks cleartext HTTP/2 only; like transport it is shared:
// one connection per upstream address carries many streams.
var h2cTransport = func() *http.Transport {
	p := &http.Protocols{}
	p.SetUnencryptedHTTP2(true)
	return &http.Transport{
		Proxy:           nil,
		Protocols:       p,
		DialContext:     (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:    1024,
		IdleConnTimeout: 90 * time.Second,
		HTTP2: &http.HTTP2Config{
			// Notice a dead upstream connection instead of hanging streams.
			SendPingTimeout: 30 * time.Second,
			PingTimeout:     15 * time.Second,
		},
	}
}()

// h2cRoundTripper sends a request for an h2c upstream through
// h2cTransport, which dials http:// URLs only.
type h2cRoundTripper struct{}

func (h2cRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	out := r.WithContext(r.Context()) // a shallow copy: a RoundTripper must not change r
	u := *r.URL
	u.Scheme = "http"
	out.URL = &u
	return h2cTransport.RoundTrip(out)
}
