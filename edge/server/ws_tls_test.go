package server_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
)

// A minimal WebSocket (RFC 6455) for the test: handshake and short
// unfragmented frames, enough to prove the upgrade passes the edge.
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

func wsAccept(key string) string {
	h := sha1.Sum([]byte(key + wsGUID))
	return base64.StdEncoding.EncodeToString(h[:])
}

func writeFrame(w io.Writer, payload []byte, mask bool) error {
	hdr := []byte{0x81, byte(len(payload))} // FIN + text, len < 126
	if !mask {
		_, err := w.Write(append(hdr, payload...))
		return err
	}
	hdr[1] |= 0x80
	key := []byte{1, 2, 3, 4}
	masked := make([]byte, len(payload))
	for i := range payload {
		masked[i] = payload[i] ^ key[i%4]
	}
	_, err := w.Write(append(append(hdr, key...), masked...))
	return err
}

func readFrame(r io.Reader) ([]byte, error) {
	hdr := make([]byte, 2)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, err
	}
	n := int(hdr[1] & 0x7f)
	var key []byte
	if hdr[1]&0x80 != 0 {
		key = make([]byte, 4)
		if _, err := io.ReadFull(r, key); err != nil {
			return nil, err
		}
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return nil, err
	}
	for i := range p {
		if key != nil {
			p[i] ^= key[i%4]
		}
	}
	return p, nil
}

// wsEcho is the backend: upgrade, then echo frames back.
func wsEcho(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		http.Error(w, "want websocket", http.StatusBadRequest)
		return
	}
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Accept: " + wsAccept(r.Header.Get("Sec-WebSocket-Key")) + "\r\n\r\n")
	_ = brw.Flush()
	for {
		p, err := readFrame(brw)
		if err != nil {
			return
		}
		if err := writeFrame(c, append([]byte("echo: "), p...), false); err != nil {
			return
		}
	}
}

func TestWebSocketThroughEdge(t *testing.T) {
	e := startEdge(t, t.TempDir())
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "ws"})
	s := e.mustDial(t, tk.Key)
	bind(t, s, protocol.BindRequest{Protocol: "http"})
	serveHTTP(t, s, http.HandlerFunc(wsEcho))

	conn, err := net.Dial("tcp", e.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef"))
	_, _ = io.WriteString(conn, "GET /chat HTTP/1.1\r\nHost: ws."+baseDomain+"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: "+key+"\r\nSec-WebSocket-Version: 13\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close() // a 101 has no body: the connection carries the WebSocket now
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != wsAccept(key) {
		t.Fatalf("handshake: %d %v", resp.StatusCode, resp.Header)
	}
	for _, msg := range []string{"hello", "again"} {
		if err := writeFrame(conn, []byte(msg), true); err != nil {
			t.Fatal(err)
		}
		got, err := readFrame(br)
		if err != nil || string(got) != "echo: "+msg {
			t.Fatalf("frame = %q, %v", got, err)
		}
	}
}

// writeWildcardCert makes a self-signed certificate for *.base and returns
// the file paths and a pool trusting it.
func writeWildcardCert(t *testing.T, dir string) (string, string, *x509.CertPool) {
	t.Helper()
	return writeServerCert(t, dir, []string{"*." + baseDomain, baseDomain}, nil)
}

// writeServerCert makes a self-signed certificate for the names and
// addresses and returns the file paths and a pool trusting it.
func writeServerCert(t *testing.T, dir string, dnsNames []string, ips []net.IP) (string, string, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: dnsNames[0]},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestHTTPSWithHTTP2(t *testing.T) {
	certDir := t.TempDir()
	certFile, keyFile, pool := writeWildcardCert(t, certDir)
	e := startEdge(t, t.TempDir(), func(c *server.Config) {
		c.HTTPSListen = "127.0.0.1:0"
		c.TLSCertFile, c.TLSKeyFile = certFile, keyFile
	})
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "secure"})
	s := e.mustDial(t, tk.Key)
	reply := bind(t, s, protocol.BindRequest{Protocol: "http"})
	_, port, _ := net.SplitHostPort(e.HTTPSAddr())
	if want := "https://secure." + baseDomain + ":" + port; reply.URL != want {
		t.Fatalf("URL = %q, want %q", reply.URL, want)
	}
	if info := e.info(t); info.HTTPSURL != "https://"+baseDomain+":"+port {
		t.Fatalf("EdgeInfo.HTTPSURL = %q", info.HTTPSURL)
	}
	serveHTTP(t, s, http.HandlerFunc(echo))

	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, e.HTTPSAddr()) // *.localhost is loopback
		},
	}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, err := hc.Get(reply.URL + "/h2")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if resp.ProtoMajor != 2 {
		t.Errorf("client spoke %s, want HTTP/2", resp.Proto)
	}
	if got["xfp"] != "https" || got["host"] != "secure."+baseDomain+":"+port || got["path"] != "/h2" {
		t.Errorf("backend saw %+v", got)
	}

	// HTTP/1.1 over TLS goes through the relay, which tells the backend
	// the same scheme.
	h1tr := tr.Clone()
	h1tr.ForceAttemptHTTP2 = false
	h1tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	h1tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
	defer h1tr.CloseIdleConnections()
	resp, err = (&http.Client{Transport: h1tr, Timeout: 10 * time.Second}).Get(reply.URL + "/h1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got = nil
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if resp.ProtoMajor != 1 || got["xfp"] != "https" || got["path"] != "/h1" {
		t.Errorf("over HTTP/1.1 (%s) the backend saw %+v", resp.Proto, got)
	}
}
