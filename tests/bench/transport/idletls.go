package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"time"
)

const idleConnBench = "edge memory per idle client connection"

// idleConns measures the edge's resident memory before and after b.idle
// idle HTTPS connections of each of protos (http/1.1, h2) are open, one
// protocol after the other: each has answered one request, as a
// browser's connection has between page loads. variant is added to the
// rows' paths.
func (b *bench) idleConns(e *edgeProc, addr, host, variant string, protos ...string) error {
	f, err := b.tlsFiles()
	if err != nil {
		return err
	}
	for _, proto := range protos {
		before, err := settledRSS(e.pid())
		if err != nil {
			return err
		}
		step("idle: opening %d %s connections", b.idle, proto)
		load := loadavg()
		var conns []io.Closer
		closeAll := func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}
		for range b.idle {
			c, err := idleConn(addr, host, proto, &tls.Config{RootCAs: f.pool, ServerName: host, NextProtos: []string{proto}})
			if err != nil {
				closeAll()
				return fmt.Errorf("idle %s connection: %w", proto, err)
			}
			conns = append(conns, c)
		}
		after, err := settledRSS(e.pid())
		closeAll()
		if err != nil {
			return err
		}
		b.rows = append(b.rows, row{bench: idleConnBench, path: fmt.Sprintf("tuna-edge, %d idle TLS %s connections%s", b.idle, proto, variant),
			value: float64(after-before) / float64(b.idle), unit: "KiB/conn", noRatio: true, load: load,
			note: fmt.Sprintf("VmRSS %d KiB before, %d KiB after", before, after)})
	}
	return nil
}

// idleConn opens a TLS connection that negotiates proto and makes one
// request on it.
func idleConn(addr, host, proto string, cfg *tls.Config) (io.Closer, error) {
	var p http.Protocols
	p.SetHTTP1(proto == "http/1.1")
	p.SetHTTP2(proto == "h2")
	tr := &http.Transport{TLSClientConfig: cfg, Protocols: &p}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cc, err := tr.NewClientConn(ctx, "https", addr)
	if err != nil {
		return nil, err
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+"/", nil)
	resp, err := cc.RoundTrip(req)
	if err != nil {
		_ = cc.Close()
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != map[string]int{"http/1.1": 1, "h2": 2}[proto] {
		_ = cc.Close()
		return nil, fmt.Errorf("GET / over %s: %s %s", proto, resp.Proto, resp.Status)
	}
	return cc, nil
}
