package desync

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/tests/rawhttp"
)

// A case is an adversarial message a client sends, with "/c00" standing
// for the case's own path prefix (of the same length, so lengths and
// chunk sizes stay right); a probe request follows it on the same
// connection, in the same write, as a smuggler's next request would.
type desyncCase struct {
	name string
	raw  string
	// answer, if set, is what the backend answers to the case's own
	// request (an adversarial answer); others are answered with their
	// target.
	answer string
}

const inner = "GET /c00/smuggled HTTP/1.1\r\nHost: admin.internal\r\nX-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Host: evil.example\r\nX-Forwarded-Proto: https\r\n\r\n"

// desyncCases are the messages of the relay's review and of the usual
// smuggling and desync catalogues.
var desyncCases = func() []desyncCase {
	h := "Host: " + host + "\r\n"
	cl := func(body string) string { return fmt.Sprintf("Content-Length: %d\r\n", len(body)) }
	chunk := func(body string) string { return fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body) }
	cases := []desyncCase{
		{name: "plain GET (control)", raw: "GET /c00/a HTTP/1.1\r\n" + h + "\r\n"},
		{name: "POST with a length (control)", raw: "POST /c00/a HTTP/1.1\r\n" + h + "Content-Length: 5\r\n\r\nhello"},
		{name: "Connection names Content-Length", raw: "POST /c00/outer HTTP/1.1\r\n" + h + "Connection: Content-Length\r\n" + cl(inner) + "\r\n" + inner},
		{name: "Connection names Transfer-Encoding", raw: "POST /c00/outer HTTP/1.1\r\n" + h + "Connection: Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(inner)},
		{name: "Connection names Host", raw: "GET /c00/a HTTP/1.1\r\n" + h + "Connection: Host\r\n\r\n"},
		{name: "Connection names a forwarding field", raw: "GET /c00/a HTTP/1.1\r\n" + h + "Connection: X-Forwarded-For\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n"},
		{name: "CL.TE", raw: "POST /c00/a HTTP/1.1\r\n" + h + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + inner},
		{name: "TE.CL", raw: "POST /c00/a HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n" + chunk(inner)},
		{name: "TE xchunked", raw: "POST /c00/a HTTP/1.1\r\n" + h + "Transfer-Encoding: xchunked\r\n" + cl(inner) + "\r\n" + inner},
		{name: "TE space before colon", raw: "POST /c00/a HTTP/1.1\r\n" + h + "Transfer-Encoding : chunked\r\n" + cl(chunk(inner)) + "\r\n" + chunk(inner)},
		{name: "TE twice", raw: "POST /c00/a HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n" + chunk(inner)},
		{name: "TE list", raw: "POST /c00/a HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked, identity\r\n\r\n" + chunk(inner)},
		{name: "TE obs-fold", raw: "POST /c00/a HTTP/1.1\r\n" + h + "X: y\r\n Transfer-Encoding: chunked\r\n" + cl(chunk(inner)) + "\r\n" + chunk(inner)},
		{name: "TE tab", raw: "POST /c00/a HTTP/1.1\r\n" + h + "Transfer-Encoding:\tchunked\r\n\r\n" + chunk(inner)},
		{name: "two lengths", raw: "POST /c00/a HTTP/1.1\r\n" + h + "Content-Length: 0\r\n" + cl(inner) + "\r\n" + inner},
		{name: "length with a sign", raw: "POST /c00/a HTTP/1.1\r\n" + h + "Content-Length: +5\r\n\r\nhello" + inner},
		{name: "length in hex", raw: "POST /c00/a HTTP/1.1\r\n" + h + "Content-Length: 0x5\r\n\r\nhello" + inner},
		{name: "length with a space", raw: "POST /c00/a HTTP/1.1\r\n" + h + "Content-Length: 5 5\r\n\r\nhello" + inner},
		{name: "body shorter than its length", raw: "POST /c00/a HTTP/1.1\r\n" + h + "Content-Length: 50\r\n\r\nhello"},
		{name: "bare LF head", raw: "POST /c00/a HTTP/1.1\n" + "Host: " + host + "\nContent-Length: 0\n\n"},
		{name: "bare CR in a field", raw: "GET /c00/a HTTP/1.1\r\n" + h + "X: a\rContent-Length: 5\r\n\r\n"},
		{name: "NUL in a field", raw: "GET /c00/a HTTP/1.1\r\n" + h + "X: a\x00b\r\n\r\n"},
		{name: "HTTP/1.0 keep-alive", raw: "POST /c00/a HTTP/1.0\r\n" + h + "Connection: keep-alive\r\n" + cl("hello") + "\r\nhello"},
		{name: "absolute-form target", raw: "GET http://" + host + "/c00/a HTTP/1.1\r\n" + h + "\r\n"},
		{name: "two Hosts", raw: "GET /c00/a HTTP/1.1\r\n" + h + "Host: admin.internal\r\n\r\n"},
		{name: "Host with a path", raw: "GET /c00/a HTTP/1.1\r\nHost: " + host + "/x\r\n\r\n"},
		{name: "space before a colon", raw: "GET /c00/a HTTP/1.1\r\n" + h + "X-Forwarded-For : 6.6.6.6\r\n\r\n"},
		{name: "Expect 100-continue", raw: "POST /c00/a HTTP/1.1\r\n" + h + "Expect: 100-continue\r\n" + cl("hello") + "\r\nhello"},
		{name: "upgrade the backend refuses", raw: "GET /c00/a HTTP/1.1\r\n" + h + "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n"},
		{name: "head over 8 KiB", raw: "GET /c00/a HTTP/1.1\r\n" + h + "X-Big: " + strings.Repeat("b", 9000) + "\r\n\r\n"},
		{name: "double space in the request line", raw: "GET  /c00/a HTTP/1.1\r\n" + h + "\r\n"},
		{name: "CONNECT", raw: "CONNECT admin.internal:443 HTTP/1.1\r\n" + h + "\r\n"},
		{name: "HTTP/2 preface", raw: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"},
		{name: "trailers with framing and forwarding fields", raw: "POST /c00/a HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nContent-Length: 99\r\nHost: admin.internal\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n"},
		{name: "chunk extension hiding a request", raw: "POST /c00/a HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\n\r\n5;x=\"\r\n" + inner + "\"\r\nhello\r\n0\r\n\r\n"},
	}
	for name, body := range malformedChunked {
		cases = append(cases, desyncCase{name: "malformed chunked: " + name,
			raw: "POST /c00/a HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\n\r\n" + body})
	}
	get := "GET /c00/ans HTTP/1.1\r\n" + h + "\r\n"
	for name, answer := range map[string]string{
		"answer: Connection names Content-Length":    "HTTP/1.1 200 OK\r\nConnection: Content-Length\r\nContent-Length: 5\r\n\r\nhello",
		"answer: Connection names Transfer-Encoding": "HTTP/1.1 200 OK\r\nConnection: Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"answer: 204 with a body":                    "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nHTTP/",
		"answer: two lengths":                        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
		"answer: length and chunked":                 "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"answer: chunked in HTTP/1.0":                "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"answer: malformed chunk":                    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
		"answer: a second answer behind it":          "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled",
		"answer: bad status line":                    "HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok",
		"answer: none":                               "",
		"answer: trailers with framing fields":       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nContent-Length: 9\r\nSet-Cookie: a=b\r\n\r\n",
	} {
		cases = append(cases, desyncCase{name: name, raw: get, answer: answer})
	}
	return cases
}()

// malformedChunked are chunked bodies that break their framing.
var malformedChunked = map[string]string{
	"not hex":               "zz\r\n",
	"minus sign":            "-5\r\nhello\r\n0\r\n\r\n",
	"space after size":      "5 \r\nhello\r\n0\r\n\r\n",
	"overflow":              "fffffffffffffffff\r\nhello\r\n0\r\n\r\n",
	"0x prefix":             "0x5\r\nhello\r\n0\r\n\r\n",
	"bare LF after size":    "5\nhello\r\n0\r\n\r\n",
	"no CRLF after data":    "5\r\nhello0\r\n\r\n",
	"data longer than size": "5\r\nhelloXX\r\n0\r\n\r\n",
	"trailer without colon": "5\r\nhello\r\n0\r\nBad Trailer\r\n\r\n",
	"obs-fold trailer":      "5\r\nhello\r\n0\r\n X: folded\r\n\r\n",
	"bare LF in trailers":   "5\r\nhello\r\n0\r\nX: a\nY: b\r\n\r\n",
}

// readAnswers reads the answers on c until it closes or stays silent for
// a moment after the last one.
func readAnswers(c net.Conn) (bodies []string, closed bool) {
	br := bufio.NewReader(c)
	for {
		_ = c.SetReadDeadline(time.Now().Add(4 * time.Second))
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && br.Buffered() == 0 {
				return bodies, false
			}
			return bodies, true
		}
		b, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if res.StatusCode < 200 {
			continue // an interim answer (100 Continue)
		}
		bodies = append(bodies, fmt.Sprintf("%d %s", res.StatusCode, b))
		if err != nil || res.Close {
			return bodies, true
		}
	}
}

// TestDesync sends every case, followed by a probe in the same write, on
// a connection of its own, through the edge and the agent to a recording
// backend, with the relay and with net/http at both ends. The properties:
//
//   - the probe gets its own answer, or the connection closes: no client
//     ever reads another request's answer (a request the edge frames out
//     of the client's bytes, such as the second of a CL.TE message under
//     net/http, gets its own answer in order);
//   - the backend never gets a request the edge did not route (a smuggled
//     one, foreign forwarding fields), and never one twice;
//   - once every client has gone, nothing is left behind: no tunnel slot,
//     no channel, no backend connection, no file descriptor.
func TestDesync(t *testing.T) {
	for _, v := range []struct {
		name string
		o    options
	}{{"relay", options{}}, {"net-http", options{netHTTP: true}}, {"relay over TLS", options{https: true}}} {
		t.Run(v.name, func(t *testing.T) {
			s := startStack(t, v.o)
			answers := map[string]string{}
			for i, tc := range desyncCases {
				if tc.answer != "" || strings.HasPrefix(tc.name, "answer: none") {
					answers[fmt.Sprintf("/c%02d/ans", i)] = tc.answer
				}
			}
			s.backend.SetAnswer(func(req rawhttp.Request) string {
				if a, ok := answers[req.Target]; ok {
					return a
				}
				return answerEcho(req)
			})
			if code, body, err := s.get("/warm-up"); err != nil || code != 200 || body != "/warm-up" {
				t.Fatalf("warm-up: %d %q %v", code, body, err)
			}
			s.waitFor(t, "the warm-up's connections to close", func() bool { return s.settled(t, 1<<30) })
			fds := openFiles(t)
			t.Run("cases", func(t *testing.T) {
				for i, tc := range desyncCases {
					t.Run(tc.name, func(t *testing.T) {
						t.Parallel()
						prefix := fmt.Sprintf("/c%02d", i)
						probe := fmt.Sprintf("GET %s/probe HTTP/1.1\r\nHost: %s\r\n\r\n", prefix, host)
						c, err := s.dial()
						if err != nil {
							t.Fatal(err)
						}
						defer c.Close()
						if _, err := io.WriteString(c, strings.ReplaceAll(tc.raw, "/c00", prefix)+probe); err != nil {
							t.Fatal(err)
						}
						bodies, _ := readAnswers(c)
						own := "200 " + prefix + "/probe"
						for j, b := range bodies {
							if strings.Contains(b, "/probe") && (b != own || j != len(bodies)-1) {
								t.Errorf("answers %q: the probe's answer is not its own, or not the last", bodies)
							}
							if strings.Contains(b, "smuggled") {
								t.Errorf("answers %q: a smuggled answer reached the client", bodies)
							}
						}
						for _, b := range bodies {
							// Backends answer with the target: a target of
							// another case is another client's answer.
							if strings.HasPrefix(b, "200 /c") && !strings.HasPrefix(b, "200 "+prefix+"/") {
								t.Errorf("answers %q: another request's answer", bodies)
							}
						}
					})
				}
			})
			checkRouted(t, s.backend.Requests(), s.scheme())
			for _, err := range s.backend.Failures() {
				// A body cut where the client broke its framing ends its
				// connection; nothing malformed may be written.
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Errorf("the backend could not parse what it got: %v", err)
				}
			}
			deadline := time.Now().Add(20 * time.Second)
			for !s.settled(t, fds) {
				if time.Now().After(deadline) {
					t.Fatalf("left behind once every client had gone: %s", s.leftBehind(t, fds))
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
