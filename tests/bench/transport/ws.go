package main

import (
	"bufio"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

const (
	wsBench = "WebSocket echo, 64 B messages, 16 connections"
	// wsConns is how many connections echo at once, one message in
	// flight on each.
	wsConns = 16
)

// wsEcho is the role `ws-echo LISTEN`: a WebSocket server that sends
// every message back, frame by frame (RFC 6455, no extensions).
func wsEcho(addr string) error {
	srv := &http.Server{Addr: addr, ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := r.Header.Get("Sec-WebSocket-Key")
			c, rw, err := http.NewResponseController(w).Hijack()
			if err != nil || key == "" {
				return
			}
			defer func() { _ = c.Close() }()
			_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + wsAccept(key) + "\r\n\r\n")
			if rw.Flush() != nil {
				return
			}
			for {
				op, payload, err := readFrame(rw.Reader)
				if err != nil || op == 8 {
					return
				}
				if writeFrame(c, op, payload, false) != nil {
					return
				}
			}
		})}
	return srv.ListenAndServe()
}

func wsAccept(key string) string {
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h[:])
}

// readFrame reads one frame, unmasking it.
func readFrame(r *bufio.Reader) (byte, []byte, error) {
	var hd [2]byte
	if _, err := io.ReadFull(r, hd[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(hd[1] & 0x7f)
	switch n {
	case 126:
		var ext [2]byte
		if _, err := io.ReadFull(r, ext[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(ext[:]))
	case 127:
		var ext [8]byte
		if _, err := io.ReadFull(r, ext[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(ext[:])
	}
	if n > 1<<20 {
		return 0, nil, errors.New("frame too large")
	}
	var mask [4]byte
	masked := hd[1]&0x80 != 0
	if masked {
		if _, err := io.ReadFull(r, mask[:]); err != nil {
			return 0, nil, err
		}
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, err
	}
	if masked {
		for i := range p {
			p[i] ^= mask[i%4]
		}
	}
	return hd[0] & 0x0f, p, nil
}

// writeFrame writes one final frame of op; a client masks it.
func writeFrame(w io.Writer, op byte, p []byte, mask bool) error {
	f := []byte{0x80 | op}
	bit := byte(0)
	if mask {
		bit = 0x80
	}
	switch {
	case len(p) < 126:
		f = append(f, bit|byte(len(p)))
	case len(p) < 1<<16:
		f = append(f, bit|126, byte(len(p)>>8), byte(len(p)))
	default:
		f = binary.BigEndian.AppendUint64(append(f, bit|127), uint64(len(p)))
	}
	if mask {
		var m [4]byte
		_, _ = rand.Read(m[:])
		f = append(f, m[:]...)
		start := len(f)
		f = append(f, p...)
		for i := range p {
			f[start+i] ^= m[i%4]
		}
	} else {
		f = append(f, p...)
	}
	_, err := w.Write(f)
	return err
}

// wsClient is the role `ws-client ADDR HOST SECONDS`: 16 connections to
// ws://HOST/ at ADDR each send a 64-byte message and wait for its echo,
// again and again. It prints messages per second, p50 and p99.
func wsClient(a []string) error {
	addr, host := a[0], a[1]
	secs, err := strconv.Atoi(a[2])
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Duration(secs) * time.Second)
	var mu sync.Mutex
	var lat []time.Duration
	errs := make(chan error, wsConns)
	var wg sync.WaitGroup
	for range wsConns {
		wg.Go(func() {
			mine, err := wsEchoLoop(addr, host, deadline)
			errs <- err
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	if len(lat) == 0 {
		return errors.New("no message echoed")
	}
	slices.Sort(lat)
	fmt.Printf("%.1f %d %d\n", float64(len(lat))/float64(secs), lat[len(lat)/2], lat[len(lat)*99/100])
	return nil
}

func wsEchoLoop(addr, host string, deadline time.Time) ([]time.Duration, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	key := base64.StdEncoding.EncodeToString([]byte("tuna-bench-key16"))
	_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+host+"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: "+key+"\r\n\r\n")
	if err != nil {
		return nil, err
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, err
	}
	// A 101 has no body: what follows is the WebSocket's, read from br.
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != wsAccept(key) {
		return nil, fmt.Errorf("upgrade answered %s", resp.Status)
	}
	var lat []time.Duration
	for time.Now().Before(deadline) {
		start := time.Now()
		if err := writeFrame(c, 1, body, true); err != nil {
			return lat, err
		}
		op, p, err := readFrame(br)
		if err != nil {
			return lat, err
		}
		if op != 1 || len(p) != len(body) {
			return lat, fmt.Errorf("echo: opcode %d, %d bytes", op, len(p))
		}
		lat = append(lat, time.Since(start))
	}
	_ = writeFrame(c, 8, nil, true)
	return lat, nil
}

// wsRow runs the ws-client role against addr for host and records the
// row, with what each message cost the processes b.metered (the echo
// server for direct; the edge and the agent through tuna, where each
// message is read and written once each way at both: that copy is all a
// message should cost them).
func (b *bench) wsRow(path, addr, host string, direct float64) (float64, error) {
	step("%s: WebSocket echo for %s", path, b.duration)
	load := loadavg()
	spent := usageOf(b.metered)
	out, err := runRole(b.self, "ws-client", addr, host, strconv.Itoa(int(b.duration.Seconds())))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	var perSec float64
	var p50, p99 time.Duration
	if _, err := fmt.Sscan(out, &perSec, &p50, &p99); err != nil {
		return 0, fmt.Errorf("%s: reading %q: %w", path, out, err)
	}
	note := costNoteOf(b.metered, spent, perSec*b.duration.Seconds(), "message")
	b.rows = append(b.rows, row{bench: wsBench, path: path, value: perSec, unit: "msg/s", p50: p50, p99: p99, direct: direct, load: load, note: note})
	return perSec, nil
}
