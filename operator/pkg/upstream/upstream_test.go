package upstream

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name, raw, protocol string
		allowExternal       bool
		want                Target
		reason, mentions    string
	}{
		{name: "service and port", raw: "http://web:8080", protocol: "http", want: Target{Scheme: "http", Host: "web", Service: "web", Namespace: "team", Port: 8080}},
		{name: "named port", raw: "http://web:http", protocol: "http", want: Target{Scheme: "http", Host: "web", Service: "web", Namespace: "team", PortName: "http"}},
		{name: "default http port", raw: "http://web", protocol: "http", want: Target{Scheme: "http", Host: "web", Service: "web", Namespace: "team", Port: 80}},
		{name: "same namespace fqdn", raw: "http://web.team.svc.cluster.local:80", protocol: "http", want: Target{Scheme: "http", Host: "web.team.svc.cluster.local", Service: "web", Namespace: "team", Port: 80}},
		{name: "same namespace short", raw: "tcp://pg.team:5432", protocol: "tcp", want: Target{Scheme: "tcp", Host: "pg.team", Service: "pg", Namespace: "team", Port: 5432}},
		{name: "other namespace allowed", raw: "http://db.other.svc:80", protocol: "http", allowExternal: true, want: Target{Scheme: "http", Host: "db.other.svc", Service: "db", Namespace: "other", Port: 80}},
		{name: "other namespace", raw: "http://web.other:80", protocol: "http", reason: ReasonRefused, mentions: "namespace other"},
		{name: "other namespace svc", raw: "http://web.other.svc:80", protocol: "http", reason: ReasonRefused, mentions: "is a Service of namespace other:"},
		{name: "bare ipv6", raw: "http://[::1]:80", protocol: "http", reason: ReasonRefused, mentions: "IP address"},
		{name: "query", raw: "http://web:80?a=b", protocol: "http", reason: ReasonInvalid, mentions: "without path"},
		{name: "ip address", raw: "http://10.0.0.1:80", protocol: "http", reason: ReasonRefused, mentions: "IP address"},
		{name: "external host", raw: "https://example.com:443", protocol: "http", reason: ReasonRefused, mentions: "external host"},
		{name: "external allowed", raw: "https://example.com:443", protocol: "http", allowExternal: true, want: Target{Scheme: "https", Host: "example.com", Port: 443}},
		{name: "ip allowed", raw: "tcp://127.0.0.1:9", protocol: "tcp", allowExternal: true, want: Target{Scheme: "tcp", Host: "127.0.0.1", Port: 9}},
		{name: "h2c", raw: "h2c://grpc:50051", protocol: "http", want: Target{Scheme: "h2c", Host: "grpc", Service: "grpc", Namespace: "team", Port: 50051}},
		{name: "h2c without port", raw: "h2c://grpc", protocol: "http", reason: ReasonInvalid, mentions: "needs a port"},
		{name: "h2c for tcp", raw: "h2c://grpc:50051", protocol: "tcp", reason: ReasonInvalid, mentions: "tcp://"},
		{name: "wrong scheme for tcp", raw: "http://pg:5432", protocol: "tcp", reason: ReasonInvalid, mentions: "tcp://"},
		{name: "tcp without port", raw: "tcp://pg", protocol: "tcp", reason: ReasonInvalid, mentions: "needs a port"},
		{name: "path", raw: "http://web:80/api", protocol: "http", reason: ReasonInvalid, mentions: "without path"},
		{name: "not a url", raw: "web:80", protocol: "http", reason: ReasonInvalid, mentions: "not a URL"},
		{name: "port out of range", raw: "http://web:70000", protocol: "http", reason: ReasonInvalid, mentions: "out of range"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.raw, tc.protocol, "team", tc.allowExternal)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("Parse(%q) = %v", tc.raw, err)
				}
				if got != tc.want {
					t.Fatalf("Parse(%q) = %+v, want %+v", tc.raw, got, tc.want)
				}
				return
			}
			var r *Refusal
			if !errors.As(err, &r) {
				t.Fatalf("Parse(%q) error = %v, want a Refusal", tc.raw, err)
			}
			if r.Reason != tc.reason || !strings.Contains(r.Message, tc.mentions) {
				t.Fatalf("Parse(%q) = %s %q, want %s mentioning %q", tc.raw, r.Reason, r.Message, tc.reason, tc.mentions)
			}
		})
	}
}
