package https

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// duplexEcho answers each line of the request body as it comes, with
// the answer's head sent before the body is read; at the body's end it
// answers the client's trailer X-Lines with its own count: a declared
// trailer (X-Echoed) and one it did not announce (X-Late).
func duplexEcho(w http.ResponseWriter, r *http.Request) {
	_ = http.NewResponseController(w).EnableFullDuplex() // HTTP/1.1: read the body while answering
	w.Header().Set("Trailer", "X-Echoed")
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return
	}
	lines := bufio.NewScanner(r.Body)
	n := 0
	for lines.Scan() {
		n++
		if _, err := fmt.Fprintf(w, "echo: %s\n", lines.Text()); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
	w.Header().Set("X-Echoed", strconv.Itoa(n))
	w.Header().Set(http.TrailerPrefix+"X-Late", "client said "+r.Trailer.Get("X-Lines"))
}

// A real HTTP/2 client streams a request body full duplex through the
// tunnel, to an http upstream (HTTP/1.1 on every hop after the edge) and
// to an h2c one: it sends a line, waits for its echo, then sends the
// next, so no hop may hold back a request chunk until the body ends or
// the answer until it is complete. Trailers cross each way: the client's
// reaches the backend, and the backend's, declared or not, reach the
// client.
func TestHTTP2FullDuplexAndTrailers(t *testing.T) {
	ns := testNamespace(t, "duplex")
	ip := service(t, ns, "echo", 8080, "")
	serveHTTP(t, ip, 8080, http.HandlerFunc(duplexEcho))
	h2cIP := service(t, ns, "echo-h2c", 8081, "kubernetes.io/h2c")
	h2c := &http.Protocols{}
	h2c.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: http.HandlerFunc(duplexEcho), Protocols: h2c}
	ln := listen(t, h2cIP, 8081)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	for name, upstream := range map[string]string{"http": "http://echo:8080", "h2c": "http://echo-h2c:8081"} {
		t.Run(name, func(t *testing.T) {
			host := publish(t, ns, name, upstream, nil)
			ctx, cancel := context.WithTimeout(context.Background(), streamWait)
			defer cancel()
			body, send := io.Pipe()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+host+"/duplex", body)
			require.NoError(t, err)
			req.Trailer = http.Header{"X-Lines": nil}
			resp, err := tlsClient("h2").Do(req)
			require.NoError(t, err, "the answer's head comes before the request body ends")
			defer resp.Body.Close()
			require.Equal(t, 2, resp.ProtoMajor)
			require.Equal(t, http.StatusOK, resp.StatusCode)

			echoes := bufio.NewReader(resp.Body)
			const lines = 20
			for i := range lines {
				_, err := fmt.Fprintf(send, "line %d\n", i)
				require.NoError(t, err)
				got, err := echoes.ReadString('\n')
				require.NoError(t, err, "the echo of line %d, before the client sends the next", i)
				require.Equal(t, fmt.Sprintf("echo: line %d\n", i), got)
			}
			req.Trailer.Set("X-Lines", strconv.Itoa(lines))
			require.NoError(t, send.Close())
			rest, err := io.ReadAll(echoes)
			require.NoError(t, err)
			assert.Empty(t, string(rest))
			assert.Equal(t, strconv.Itoa(lines), resp.Trailer.Get("X-Echoed"), "a declared trailer reaches the client: %v", resp.Trailer)
			assert.Equal(t, "client said "+strconv.Itoa(lines), resp.Trailer.Get("X-Late"),
				"the client's trailer reaches the backend, and the backend's undeclared trailer the client: %v", resp.Trailer)
		})
	}
}
