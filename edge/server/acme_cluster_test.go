package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/dnstest"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

// serverLeaf handshakes with addr for name and returns the leaf served.
func serverLeaf(t *testing.T, addr, name string, roots *x509.CertPool) *x509.Certificate {
	t.Helper()
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: &tls.Config{ServerName: name, RootCAs: roots, MinVersion: tls.VersionTLS12}}
	var leaf *x509.Certificate
	// The first handshake for a new name waits on the CA within the
	// handshake timeout; a client cut off retries, as browsers do.
	waitFor(t, "a certificate for "+name+" at "+addr, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			t.Logf("TLS to %s for %s: %v", addr, name, err)
			return false
		}
		leaf = c.(*tls.Conn).ConnectionState().PeerCertificates[0]
		_ = c.Close()
		return true
	})
	return leaf
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

// TestACMEAcrossClusterNodes: pebble validates every challenge for real,
// on another node than the one that ordered. Node A prefers HTTP-01 and
// pebble reaches node B's HTTP listener; node B prefers TLS-ALPN-01 and
// pebble reaches node A's HTTPS listener. Each answers from the shared
// store, both nodes serve the same ECDSA certificate, a name asked of both
// at once is ordered once, and a renewal by one node reaches the other.
func TestACMEAcrossClusterNodes(t *testing.T) {
	dns := dnstest.Start(t)
	httpA, httpsA, httpB, httpsB := ports.Addr(t), ports.Addr(t), ports.Addr(t), ports.Addr(t)
	dirURL, caFile, issued := startPebbleWith(t, pebbleOptions{
		Validate: true, DNS: dns.Addr(), HTTPPort: portOf(t, httpB), TLSPort: portOf(t, httpsA),
	})
	clock := newTestClock()
	logs := &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the nodes' log:\n%s", logs.String())
		}
	})
	acmeNode := func(httpAddr, httpsAddr string, challenge string) func(*server.Config) {
		return func(c *server.Config) {
			c.HTTPListen, c.HTTPSListen = httpAddr, httpsAddr
			c.ACMEDirectory, c.ACMECAFile = dirURL, caFile
			c.ACMEChallenges = []string{challenge}
			c.Clock = clock.Now
			c.Logger = slog.New(slog.NewTextHandler(logs, nil))
		}
	}
	c := startCluster(t, 0)
	a := c.start(t, 0, acmeNode(httpA, httpsA, "http-01"))
	b := c.start(t, 1, acmeNode(httpB, httpsB, "tls-alpn-01"))

	api := a.client(a.writeKey)
	for _, sub := range []string{"via-http", "via-alpn", "both"} {
		if _, err := api.CreateDomain(context.Background(), apiwire.CreateDomain{Subdomain: sub}); err != nil {
			t.Fatal(err)
		}
		host := sub + "." + baseDomain
		dns.SetA(host, net.IPv4(127, 0, 0, 1))
		// Both nodes serve the name (the reservation reached B's index).
		for _, n := range []*testEdge{a, b} {
			waitFor(t, host+" known at "+n.HTTPAddr(), func() bool {
				code, _, _ := n.get(t, host, "/", nil)
				return code == http.StatusBadGateway
			})
		}
	}

	same := func(host string, first *x509.Certificate, other *testEdge) {
		t.Helper()
		leaf := serverLeaf(t, other.HTTPSAddr(), host, issued)
		if !bytes.Equal(leaf.Raw, first.Raw) {
			t.Fatalf("%s: the nodes serve different certificates (serials %s and %s)", host, first.SerialNumber, leaf.SerialNumber)
		}
		if leaf.PublicKeyAlgorithm != x509.ECDSA {
			t.Fatalf("%s: the certificate's key is %s, want ECDSA", host, leaf.PublicKeyAlgorithm)
		}
	}
	viaHTTP := serverLeaf(t, a.HTTPSAddr(), "via-http."+baseDomain, issued)
	same("via-http."+baseDomain, viaHTTP, b)
	viaALPN := serverLeaf(t, b.HTTPSAddr(), "via-alpn."+baseDomain, issued)
	same("via-alpn."+baseDomain, viaALPN, a)

	var wg sync.WaitGroup
	leaves := make([]*x509.Certificate, 2)
	for i, n := range []*testEdge{a, b} {
		wg.Go(func() { leaves[i] = serverLeaf(t, n.HTTPSAddr(), "both."+baseDomain, issued) })
	}
	wg.Wait()
	if !bytes.Equal(leaves[0].Raw, leaves[1].Raw) {
		t.Fatalf("a name asked of both nodes at once got two certificates (serials %s and %s)", leaves[0].SerialNumber, leaves[1].SerialNumber)
	}

	// Two thirds into the certificates' lifetime (pebble issues for a
	// day), node A's renewal scan orders them again; node B, serving the
	// old one from memory, finds the new one in the store.
	clock.Advance(17 * time.Hour)
	if err := a.SyncTLS(); err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"via-http." + baseDomain, "via-alpn." + baseDomain} {
		renewed := serverLeaf(t, a.HTTPSAddr(), host, issued)
		if renewed.SerialNumber.Cmp(viaHTTP.SerialNumber) == 0 || renewed.SerialNumber.Cmp(viaALPN.SerialNumber) == 0 {
			t.Fatalf("%s: node A serves the certificate it had before the renewal", host)
		}
		waitFor(t, "node B to serve the renewed certificate of "+host, func() bool {
			return bytes.Equal(serverLeaf(t, b.HTTPSAddr(), host, issued).Raw, renewed.Raw)
		})
	}
}
