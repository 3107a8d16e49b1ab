package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

// A Gateway address serves HTTPS too: TLS ends there with the
// certificate the address's holder uploaded, whatever name the client
// sends (the certificate need not name the address: clients reach it by
// names of their own DNS), and the request goes to the address's tunnel
// as on HTTP. Only the holder sets it; another address keeps the edge's
// own certificate.
func TestGatewayAddressServesHTTPSWithItsHoldersCertificate(t *testing.T) {
	p := ports.Range(t, 1)[0]
	a := netip.MustParseAddr(fmt.Sprintf("127.%d.%d.1", p>>8, p&0xff))
	b := a.Next()
	pp := ports.Range(t, 2)
	httpPort, httpsPort := pp[0], pp[1]
	defCert, defKey, _ := writeWildcardCert(t, t.TempDir())
	e := startEdge(t, t.TempDir(), func(c *server.Config) {
		c.HTTPSListen = "127.0.0.1:0"
		c.TLSCertFile, c.TLSKeyFile = defCert, defKey
		c.GatewayAddresses = []netip.Addr{a, b}
		c.GatewayHTTPPort, c.GatewayHTTPSPort = httpPort, httpsPort
	})
	if info := e.info(t); info.GatewayHTTPSPort != httpsPort || info.GatewayHTTPPort != httpPort {
		t.Fatalf("GET /v1/edge: Gateway ports %d (HTTP) and %d (HTTPS), want %d and %d", info.GatewayHTTPPort, info.GatewayHTTPSPort, httpPort, httpsPort)
	}
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: a.String(), Owner: "c/a"})
	s := e.mustDial(t, tk.Key)
	bind(t, s, protocol.BindRequest{Protocol: "http"})
	serveHTTP(t, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s %s", r.Header.Get("X-Forwarded-Proto"), r.Host, r.URL.Path)
	}))
	atA := net.JoinHostPort(a.String(), strconv.Itoa(httpsPort))
	atB := net.JoinHostPort(b.String(), strconv.Itoa(httpsPort))
	edgeLeaf := leafAt(t, atA, "shop.example.org")
	if !edgeLeaf.Equal(leafOfFile(t, defCert)) {
		t.Fatalf("before any upload the address served %v, want the edge's own certificate", edgeLeaf.DNSNames)
	}

	// The holder's certificate, for a name, not the address.
	certFile, keyFile, pool := writeServerCert(t, t.TempDir(), []string{"*.example.org"}, nil)
	in := apiwire.PutCertificate{ChainPEM: readFile(t, certFile), KeyPEM: readFile(t, keyFile)}
	ctx := context.Background()
	c := e.client(e.writeKey)
	if _, err := c.PutCertificate(ctx, a.String(), "c/b", in); apiwire.CodeOf(err) != apiwire.CodeAddressOwned {
		t.Fatalf("another owner set the address's certificate: %v", err)
	}
	if _, err := c.PutCertificate(ctx, b.String(), "c/a", in); apiwire.CodeOf(err) != apiwire.CodeNotFound {
		t.Fatalf("a certificate for an address nobody holds: %v, want not_found", err)
	}
	if _, err := c.PutCertificate(ctx, "127.0.0.99", "c/a", in); apiwire.CodeOf(err) != apiwire.CodeInvalidRequest {
		t.Fatalf("a certificate for an address that is not a Gateway address: %v, want invalid_request", err)
	}
	got, err := c.PutCertificate(ctx, a.String(), "c/a", in)
	if err != nil {
		t.Fatalf("the holder's certificate for its address: %v", err)
	}
	if got.Host != a.String() || got.Owner != "c/a" {
		t.Fatalf("stored %+v", got)
	}
	want := leafOfFile(t, certFile)
	for _, sni := range []string{"shop.example.org", "other.example.org", ""} {
		if leaf := leafAt(t, atA, sni); !leaf.Equal(want) {
			t.Fatalf("server name %q on the address: served %v, want its holder's certificate", sni, leaf.DNSNames)
		}
	}
	if leaf := leafAt(t, atB, "shop.example.org"); !leaf.Equal(edgeLeaf) {
		t.Fatalf("another address served %v, want the edge's own certificate", leaf.DNSNames)
	}
	if leaf := leafAt(t, e.HTTPSAddr(), "shop.example.org"); leaf.Equal(want) {
		t.Fatal("the shared HTTPS listener served the address's certificate for a name")
	}

	// A verifying client, by a name the certificate holds, reaches the
	// address's tunnel over HTTPS (h2), with the Host it sent.
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "shop.example.org"}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	req, err := http.NewRequest(http.MethodGet, "https://"+atA+"/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "shop.example.org"
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("GET over HTTPS on the Gateway address: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "https shop.example.org /x" || resp.ProtoMajor != 2 {
		t.Fatalf("HTTPS on the Gateway address: %s %d %q, want HTTP/2 200 \"https shop.example.org /x\"", resp.Proto, resp.StatusCode, body)
	}
}

// leafAt is the leaf certificate the TLS listener at addr serves for
// server name sni, unverified.
func leafAt(t *testing.T, addr, sni string) *x509.Certificate {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: sni, InsecureSkipVerify: true}) //nolint:gosec // the test compares the served certificate itself
	if err != nil {
		t.Fatalf("TLS to %s (server name %q): %v", addr, sni, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

func leafOfFile(t *testing.T, file string) *x509.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(file, filepath.Join(filepath.Dir(file), "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

func readFile(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
