package server

import (
	"crypto/tls"
	"encoding/pem"
	"log/slog"
	"net"
	"net/http"
	"strings"
)

// apiHTTPServer is the control API's server: the API, /metrics and
// /healthz, with every phase of a connection bounded.
func (e *Edge) apiHTTPServer() *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", e.m.Handler())
	mux.HandleFunc("GET /healthz", e.healthz)
	mux.Handle("/", e.api)
	t := e.cfg.APITimeouts
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		// Headers of API calls are a Bearer key and a few more; 64 KiB is
		// plenty and keeps a header flood short.
		MaxHeaderBytes: 64 << 10,
		// Failed handshakes (a client with a wrong pin, scanners) are
		// worth a line, not an error.
		ErrorLog: slog.NewLogLogger(e.log.With("listener", "API").Handler(), slog.LevelInfo),
	}
	// Long polls (GET /v1/secrets?wait=) hold their handler for up to a
	// minute: they end at once when a graceful shutdown starts, and set a
	// write deadline of their own beyond the timeouts above.
	srv.RegisterOnShutdown(e.api.Shutdown)
	if e.apiTLS != nil {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{e.apiTLS.cert}, MinVersion: tls.VersionTLS12}
	}
	return srv
}

// startAPI serves the API on ln and logs how clients can trust it.
func (e *Edge) startAPI(ln net.Listener) {
	scheme := "https"
	if e.apiTLS == nil {
		scheme = "http"
		e.log.Warn("INSECURE: the control API serves plain HTTP (--insecure-http-api): API keys and the SSH host key "+
			"travel in clear; use it only behind a TLS-terminating proxy on a trusted network",
			"api", ln.Addr().String())
	} else {
		e.log.Info("control API certificate: clients pin this fingerprint (tuna-edge api-fingerprint prints it)",
			"fingerprint", e.apiTLS.fingerprint, "source", e.apiTLS.source, "file", e.apiCertSource())
		if len(e.apiTLS.missing) > 0 {
			e.log.Warn("the generated API certificate does not name these hosts, so clients that trust it as a CA bundle "+
				"and dial them fail; pinning by fingerprint works regardless. Delete the file to generate a new certificate "+
				"(its fingerprint changes)", "hosts", strings.Join(e.apiTLS.missing, ","), "file", e.apiCertSource())
		}
	}
	e.apiURL = scheme + "://" + dialable(ln.Addr().String())
	e.serveHTTP("API", e.apiHTTPServer(), ln, e.apiTLS != nil)
}

func (e *Edge) apiCertSource() string {
	if e.cfg.APITLSCert != "" {
		return e.cfg.APITLSCert
	}
	return APICertPath(e.cfg.DataDir)
}

// APIFingerprint is the "sha256:HEX" fingerprint of the API's certificate,
// which clients pin; "" when the API serves plain HTTP.
func (e *Edge) APIFingerprint() string {
	if e.apiTLS == nil {
		return ""
	}
	return e.apiTLS.fingerprint
}

// APICertificatePEM is the API's leaf certificate in PEM, for clients that
// trust it as a CA bundle; nil when the API serves plain HTTP.
func (e *Edge) APICertificatePEM() []byte {
	if e.apiTLS == nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: e.apiTLS.cert.Certificate[0]})
}
