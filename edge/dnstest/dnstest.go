// Package dnstest is a tiny authoritative DNS server on 127.0.0.1 for tests
// of custom-domain verification: it answers CNAME and TXT from a table that
// the test changes while the server runs.
package dnstest

import (
	"net"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// Server answers over UDP.
type Server struct {
	conn  net.PacketConn
	mu    sync.Mutex
	cname map[string]string
	txt   map[string][]string
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
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{conn: pc, cname: map[string]string{}, txt: map[string][]string{}}
	go s.serve()
	return s, nil
}

// Close stops the server.
func (s *Server) Close() error { return s.conn.Close() }

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
	s.mu.Unlock()

	rcode := dnsmessage.RCodeSuccess
	if !hasCNAME && !hasTXT {
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
