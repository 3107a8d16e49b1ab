package server_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
)

// An HTTP/2 connection's concurrent streams each take a channel, and
// keep them for the next streams: rounds of 8 streams at once open about
// 8 channels in all, not a few more every round.
func TestHTTP2StreamsKeepTheirChannels(t *testing.T) {
	certFile, keyFile, pool := writeWildcardCert(t, t.TempDir())
	e := startEdge(t, t.TempDir(), func(c *server.Config) {
		c.HTTPSListen = "127.0.0.1:0"
		c.TLSCertFile, c.TLSKeyFile = certFile, keyFile
	})
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "streams"})
	s := e.mustDial(t, tk.Key)
	reply := bind(t, s, protocol.BindRequest{Protocol: "http"})

	const streams, rounds = 8, 12
	var opened atomic.Int32
	arrived := make(chan struct{}, streams)
	release := make(chan struct{})
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			arrived <- struct{}{}
			<-release
			_, _ = io.WriteString(w, "ok")
		}),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				opened.Add(1)
			}
		},
	}
	go func() { _ = srv.Serve(s.Listener()) }()
	t.Cleanup(func() { _ = srv.Close() })

	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, e.HTTPSAddr())
		},
	}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	for round := range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, streams)
		for i := range streams {
			wg.Go(func() {
				resp, err := hc.Get(fmt.Sprintf("%s/r%d/s%d", reply.URL, round, i))
				if err != nil {
					errs <- err
					return
				}
				defer resp.Body.Close()
				if b, _ := io.ReadAll(resp.Body); resp.ProtoMajor != 2 || string(b) != "ok" {
					errs <- fmt.Errorf("%s %s %q", resp.Proto, resp.Status, b)
				}
			})
		}
		// Every stream of the round is at the backend at once before any
		// is answered: they cannot share a channel.
		for range streams {
			select {
			case <-arrived:
			case err := <-errs:
				t.Fatal(err)
			case <-time.After(30 * time.Second):
				t.Fatalf("round %d: the streams never all reached the backend", round)
			}
		}
		for range streams {
			release <- struct{}{}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	// 8 channels serve every round; a few more are allowed for channels
	// the edge found no longer reusable. Keeping only 4 opens 4 more per
	// round: 52 in all.
	if n := opened.Load(); n > 2*streams {
		t.Fatalf("%d rounds of %d concurrent streams opened %d channels, want at most %d", rounds, streams, n, 2*streams)
	}
}

// The HTTPS listener's h2 connections are served by the edge's own HTTP/2
// server unless NetHTTPH2 (--edge-h2=false) hands them to net/http's: the
// two tell apart on the wire by the Date field, which net/http adds to
// every answer and the edge's own server, like the h1 relay, does not.
func TestHTTPSListenerH2ServerByDefaultAndWayBack(t *testing.T) {
	for _, tc := range []struct {
		name     string
		netHTTP  bool
		wantDate bool
	}{{"default", false, false}, {"edge-h2=false", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			certFile, keyFile, pool := writeWildcardCert(t, t.TempDir())
			e := startEdge(t, t.TempDir(), func(c *server.Config) {
				c.HTTPSListen = "127.0.0.1:0"
				c.TLSCertFile, c.TLSKeyFile = certFile, keyFile
				c.NetHTTPH2 = tc.netHTTP
			})
			tr := &http.Transport{
				TLSClientConfig:   &tls.Config{RootCAs: pool},
				ForceAttemptHTTP2: true,
				DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, network, e.HTTPSAddr())
				},
			}
			defer tr.CloseIdleConnections()
			resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Get("https://nobody." + baseDomain + "/")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusNotFound {
				t.Fatalf("got %s %s, want HTTP/2.0 404 for a host nobody holds", resp.Proto, resp.Status)
			}
			if got := resp.Header.Get("Date") != ""; got != tc.wantDate {
				t.Fatalf("Date present: %v, want %v (net/http's HTTP/2 server adds it, the edge's own does not): %v", got, tc.wantDate, resp.Header)
			}
		})
	}
}
