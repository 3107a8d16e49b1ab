package sshd

import (
	"code.tuna.am/tuna/k8s-operator/edge/internal/third_party/xcrypto/ssh"

	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

// A bind reads the edge's state (the key's expiry, the address's owner),
// which in a cluster's etcd may take up to the store's timeout. Served in
// the session's loop, it would hold up everything else the agent sends
// meanwhile: a stream it could not dial (its public connection waiting to
// fall back to a channel), a channel it must not open, and, once
// x/crypto/ssh's queue of 16 requests is full, the reading of the whole
// connection. So a bind is answered on a goroutine of its own, and the
// loop goes on. SSH matches a reply to its request by order alone, so the
// requests that want a reply and come after a bind still in flight are
// answered after it, on a goroutine too: only then, and never in an idle
// session, does the session cost a goroutine more.

// answers orders the replies; only the session's loop uses it.
type answers struct {
	// last is closed once the last reply handed to a goroutine is sent;
	// nil while none is.
	last chan struct{}
}

// answer runs fn and replies to req with its result, after every reply
// before it. slow runs it on a goroutine even when nothing is queued.
func (a *answers) answer(req *ssh.Request, slow bool, fn func() (bool, []byte)) {
	prev := a.last
	if prev != nil {
		select {
		case <-prev:
			prev, a.last = nil, nil
		default:
		}
	}
	if prev == nil && !slow {
		ok, payload := fn()
		_ = req.Reply(ok, payload)
		return
	}
	done := make(chan struct{})
	a.last = done
	go func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		ok, payload := fn()
		_ = req.Reply(ok, payload)
	}()
}

// wait returns once every reply handed to a goroutine is sent.
func (a *answers) wait() {
	if a.last != nil {
		<-a.last
	}
}

// serve handles one request of the agent, in the session's loop.
func (ss *session) serve(req *ssh.Request) {
	switch req.Type {
	case protocol.KeepaliveRequestType:
		ss.answers.answer(req, false, func() (bool, []byte) { return true, nil })
	case protocol.StreamFailedRequestType:
		ss.streams.fail(req.Payload) // no reply: at once, whatever is in flight
	case protocol.DrainRequestType:
		// The reply goes after the idle connections are taken back: the
		// agent waits, from then on, for the rest to close.
		ss.answers.answer(req, false, func() (bool, []byte) { ss.drain(); return true, nil })
	case protocol.LeaveRequestType:
		ss.answers.answer(req, false, func() (bool, []byte) { return ss.leave(), nil })
	case protocol.BindRequestType:
		ss.answers.answer(req, true, func() (bool, []byte) {
			reply, err := ss.bind(req.Payload)
			if err != nil {
				return false, protocol.Marshal(err)
			}
			reply.Nodes = ss.srv.nodeList()
			if hub := ss.srv.cfg.Streams; hub != nil {
				reply.StreamCert = hub.Fingerprint()
			}
			return true, protocol.Marshal(reply)
		})
	default:
		if req.WantReply {
			ss.answers.answer(req, false, func() (bool, []byte) { return false, nil })
		}
	}
}
