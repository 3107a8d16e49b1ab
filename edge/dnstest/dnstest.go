// Package dnstest is a tiny authoritative DNS server on 127.0.0.1 for tests
// of custom-domain verification: it answers CNAME and TXT from a table that
// the test changes while the server runs, and A records for an ACME CA
// that validates challenges on loopback.
package dnstest

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"

	"code.tuna.am/tuna/k8s-operator/internal/accept"
)

// Server answers over UDP, and over TCP on the same port (resolvers that
// ask over TCP, such as an ACME CA's).
type Server struct {
	conn  net.PacketConn
	tcp   net.Listener
	mu    sync.Mutex
	cname map[string]string
	txt   map[string][]string
	a     map[string][4]byte
}

// Start listens on 127.0.0.1:0 until the test ends.
func Start(t *testing.T) *Server {
	t.Helper()
	s, err := Listen()
	if err != nil {
		t.Fatalf("dnstest: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Listen starts a server on 127.0.0.1:0; Close stops it. For setups that
// outlive one test (a TestMain).
func Listen() (*Server, error) {
	var pc net.PacketConn
	var ln net.Listener
	for attempt := 0; ; attempt++ {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			return nil, err
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		_ = pc.Close()
		if attempt == 10 {
			return nil, err
		}
	}
	s := &Server{conn: pc, tcp: ln, cname: map[string]string{}, txt: map[string][]string{}, a: map[string][4]byte{}}
	go s.serve()
	go s.serveTCP()
	return s, nil
}

// Close stops the server.
func (s *Server) Close() error { _ = s.tcp.Close(); return s.conn.Close() }

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.conn.LocalAddr().String() }

func fqdn(n string) string { return strings.ToLower(strings.TrimSuffix(n, ".")) + "." }

// SetCNAME makes name an alias of target.
func (s *Server) SetCNAME(name, target string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cname[fqdn(name)] = fqdn(target)
}

// SetTXT sets the TXT records of name, one record per value.
func (s *Server) SetTXT(name string, values ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.txt[fqdn(name)] = values
}

// SetA makes name resolve to the IPv4 address ip.
func (s *Server) SetA(name string, ip net.IP) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.a[fqdn(name)] = [4]byte(ip.To4())
}

func (s *Server) serve() {
	buf := make([]byte, 1500)
	for {
		n, addr, err := s.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if out, err := s.answer(buf[:n]); err == nil {
			_, _ = s.conn.WriteTo(out, addr)
		}
	}
}

// serveTCP answers DNS over TCP, accepting with the product's one accept
// policy until the listener closes.
func (s *Server) serveTCP() { _ = accept.Serve(accept.Wrap(s.tcp, nil), s.answerTCP) }

// answerTCP answers the messages of one connection, each behind its 2-byte
// length.
func (s *Server) answerTCP(c net.Conn) {
	defer func() { _ = c.Close() }()
	for {
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return
		}
		req := make([]byte, int(l[0])<<8|int(l[1]))
		if _, err := io.ReadFull(c, req); err != nil {
			return
		}
		out, err := s.answer(req)
		if err != nil {
			return
		}
		if _, err := c.Write(append([]byte{byte(len(out) >> 8), byte(len(out))}, out...)); err != nil {
			return
		}
	}
}

func (s *Server) answer(req []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(req)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	name := strings.ToLower(q.Name.String())
	s.mu.Lock()
	cname, hasCNAME := s.cname[name]
	txt, hasTXT := s.txt[name]
	a, hasA := s.a[name]
	s.mu.Unlock()

	rcode := dnsmessage.RCodeSuccess
	if !hasCNAME && !hasTXT && !hasA {
		rcode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RCode: rcode})
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1}
	switch {
	case hasCNAME && q.Type != dnsmessage.TypeTXT:
		// A CNAME answers every type but TXT here (the real rule is every
		// type; keeping TXT separate lets one name carry both in tests).
		t, err := dnsmessage.NewName(cname)
		if err != nil {
			return nil, err
		}
		if err := b.CNAMEResource(rh, dnsmessage.CNAMEResource{CNAME: t}); err != nil {
			return nil, err
		}
	case hasA && q.Type == dnsmessage.TypeA:
		if err := b.AResource(rh, dnsmessage.AResource{A: a}); err != nil {
			return nil, err
		}
	case hasTXT && q.Type == dnsmessage.TypeTXT:
		// One record per value, as a zone with several TXT records has.
		for _, v := range txt {
			if err := b.TXTResource(rh, dnsmessage.TXTResource{TXT: []string{v}}); err != nil {
				return nil, err
			}
		}
	}
	return b.Finish()
}
