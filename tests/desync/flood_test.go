package desync

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// A flood of malformed chunked requests and of uploads abandoned
// mid-body against one tunnel, each connection closed by its client at
// once, leaves the tunnel serving another visitor: every flooding
// exchange ends and gives its slot back. Before the relay ended such
// exchanges, each held its slot for good, and once the flood had used the
// tunnel's limit of requests in flight, every visitor got 503 until the
// Tunnel was deleted.
//
// While the flood is on, the edge holds as many of its exchanges at once
// as it has accepted and not yet ended, so a visitor may meet the limit
// then, as the limit intends; what must hold is that the slots come back.
func TestFloodLeavesOtherVisitorsServed(t *testing.T) {
	const limit = 32
	// No flooding connection waits for a head (each sends its whole head
	// and closes), so the head timeout only bounds the TLS handshakes of
	// the flood: at 1 s, a machine loaded to 20x its cores made the edge
	// end some before they were done, and the flooders' dials failed.
	const readHeader = 10 * time.Second
	for _, v := range []struct {
		name string
		o    options
	}{
		{"relay", options{maxInFlight: limit, readHeader: readHeader}},
		{"net-http", options{maxInFlight: limit, netHTTP: true, readHeader: readHeader}},
		{"relay over TLS", options{maxInFlight: limit, https: true, readHeader: readHeader}},
	} {
		t.Run(v.name, func(t *testing.T) {
			s := startStack(t, v.o)
			s.backend.SetAnswer(answerEcho)
			if code, _, err := s.get("/warm-up"); err != nil || code != 200 {
				t.Fatalf("warm-up: %d %v", code, err)
			}
			s.waitFor(t, "the warm-up's connections to close", func() bool { return s.settled(t, 1<<30) })
			fds := openFiles(t)

			// Ten times the limit of each kind, from four clients each.
			const each, clients = 10 * limit, 4
			floods := map[string]string{
				"malformed chunked": "POST /c99/flood HTTP/1.1\r\nHost: " + host + "\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
				"abandoned upload":  "POST /c99/upload HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 1000000\r\n\r\n" + strings.Repeat("u", 1000),
			}
			var wg sync.WaitGroup
			for _, raw := range floods {
				for range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range each / clients {
							c, err := s.dial()
							if err != nil {
								t.Error(err)
								return
							}
							_, _ = io.WriteString(c, raw)
							_ = c.Close() // the attacker never waits
						}
					}()
				}
			}
			// A visitor during the flood, for the record.
			refused, served := 0, 0
			flooding := make(chan struct{})
			go func() { wg.Wait(); close(flooding) }()
			for i := 0; ; i++ {
				select {
				case <-flooding:
				default:
					if code, _, err := s.get(fmt.Sprintf("/visitor/during-%d", i)); err == nil && code == 200 {
						served++
					} else {
						refused++
					}
					continue
				}
				break
			}
			t.Logf("during the flood: %d visitor requests served, %d refused (the limit is %d in flight)", served, refused, limit)

			// Every slot comes back, and nothing else is left behind.
			deadline := time.Now().Add(20 * time.Second)
			for !s.settled(t, fds) {
				if time.Now().After(deadline) {
					t.Fatalf("left behind by the flood: %s", s.leftBehind(t, fds))
				}
				time.Sleep(10 * time.Millisecond)
			}
			for i := range 3 * limit {
				path := fmt.Sprintf("/visitor/after-%d", i)
				if code, body, err := s.get(path); err != nil || code != 200 || body != path {
					t.Fatalf("after the flood: %s: %d %q %v", path, code, body, err)
				}
			}
			for _, r := range s.backend.Requests() {
				if strings.HasPrefix(r.Target, "/c99/") {
					t.Errorf("a flooding request reached the backend whole: %s %s (%d bytes)", r.Method, r.Target, len(r.Body))
				}
			}
		})
	}
}
