package tunnelclient

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"time"

	"golang.org/x/crypto/ssh"

	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/streams"
	"code.tuna.am/tuna/k8s-operator/internal/connio"
)

// streamDialTimeout bounds dialing one stream connection; the edge waits
// a few seconds for it before opening a channel instead.
const streamDialTimeout = 4 * time.Second

// incoming is a public connection waiting for Accept: a channel still to
// accept, or a stream already dialled.
type incoming struct {
	channel ssh.NewChannel
	stream  *Conn
}

// dialStream answers the edge's StreamOpen: it dials the stream and queues
// it for Accept, or tells the edge why it cannot, so that the edge opens a
// channel at once.
func (s *Session) dialStream(payload []byte) {
	var req protocol.StreamOpen
	if err := json.Unmarshal(payload, &req); err != nil {
		return // without a token there is nobody to answer
	}
	c, err := s.openStream(req)
	if err != nil {
		s.refuseStream(req.Token, err)
		return
	}
	select {
	case s.queue <- incoming{stream: c}:
	default:
		// As with a channel over the queue: the public client's
		// connection ends.
		_ = c.Close()
	}
}

func (s *Session) openStream(req protocol.StreamOpen) (*Conn, error) {
	s.mu.Lock()
	cert := s.streamCert
	s.mu.Unlock()
	switch {
	case s.cfg.NoStreams:
		return nil, errors.New("this agent takes public connections on SSH channels only")
	case cert == "":
		return nil, errors.New("the bind reply named no stream certificate")
	}
	ctx, cancel := context.WithTimeout(context.Background(), streamDialTimeout)
	defer cancel()
	go func() { // the dial ends with the session too
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	sc, err := streams.Dial(ctx, s.cfg.Addr, cert, req.Token)
	if err != nil {
		return nil, err
	}
	c := &Conn{Conn: sc, info: req.Info, stream: s}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.done:
		_ = sc.Close()
		return nil, net.ErrClosed
	default:
	}
	if s.streams == nil {
		s.streams = map[*Conn]struct{}{}
	}
	s.streams[c] = struct{}{}
	return c, nil
}

func (s *Session) refuseStream(token string, err error) {
	_, _, _ = s.conn.SendRequest(protocol.StreamFailedRequestType, false,
		protocol.Marshal(protocol.StreamFailed{Token: token, Error: err.Error()}))
}

// closeStreams ends the session's streams with it: when the edge closes a
// session (a revoked key, a shutdown), its connections end, as channels do.
func (s *Session) closeStreams() {
	s.mu.Lock()
	open := s.streams
	s.streams = nil
	s.mu.Unlock()
	for c := range open {
		_ = c.Conn.Close()
	}
}

// Close closes the connection; a stream leaves its session's set.
func (c *Conn) Close() error {
	if s := c.stream; s != nil {
		s.mu.Lock()
		delete(s.streams, c)
		s.mu.Unlock()
	}
	err := c.Conn.Close()
	if s := c.owner; s != nil {
		c.once.Do(s.closedConn)
	}
	return err
}

// CloseWrite passes a half-close on: the upstream's EOF reaches the public
// client while the other way still flows.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// WriteTo and ReadFrom let io.Copy use the connection's own copy (a
// channel read in place, a stream's large buffers).
func (c *Conn) WriteTo(w io.Writer) (int64, error)  { return connio.WriteTo(c.Conn, w) }
func (c *Conn) ReadFrom(r io.Reader) (int64, error) { return connio.ReadFrom(c.Conn, r) }
