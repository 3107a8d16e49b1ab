package sshd

import (
	"reflect"
	"sync"

	"code.tuna.am/tuna/k8s-operator/edge/internal/third_party/xcrypto/ssh"
)

// x/crypto/ssh hands a connection's requests and channels to its user on
// Go channels, which only a goroutine can wait on. A goroutine per session
// waiting on them would be the edge's own largest cost of an idle session
// (a stack of 4 KiB or more, and the runtime's record of the goroutine:
// tests/bench/sessions). So a watcher waits on the channels of up to
// watchShare sessions at once; when a request or a channel arrives, it
// hands that session to a goroutine of its own, which serves what is
// queued and gives the session back. One goroutine at a time receives from
// a session's channels, so its requests are served in order, as before;
// an idle session costs no goroutine of the edge's.

// watchShare is how many sessions one watcher waits on: each wake-up of a
// watcher costs work in proportion to it (reflect.Select), and each watcher
// a goroutine.
const watchShare = 64

// watchers are the edge's watchers. They stay once started: at most one
// per watchShare sessions the edge held at once.
type watchers struct {
	mu   sync.Mutex
	all  []*watcher
	open func(*watcher) // starts a new watcher's goroutine
}

// watcher waits on its sessions' requests and channels.
type watcher struct {
	add chan *session // sessions given to it, new or back from serving
	// held counts the sessions it waits on or has handed out to serve
	// (under watchers.mu): it takes new ones while below watchShare.
	held int
}

// watch starts waiting on a new session's requests and channels.
func (ws *watchers) watch(ss *session) {
	ws.mu.Lock()
	var w *watcher
	for _, c := range ws.all {
		if c.held < watchShare {
			w = c
			break
		}
	}
	if w == nil {
		w = &watcher{add: make(chan *session)}
		ws.all = append(ws.all, w)
		ws.open(w)
	}
	w.held++
	ss.watcher = w
	ws.mu.Unlock()
	w.add <- ss
}

// forget gives back a session's place in its watcher once it has ended.
func (ws *watchers) forget(ss *session) {
	ws.mu.Lock()
	ss.watcher.held--
	ws.mu.Unlock()
}

// run waits on the sessions given to it; it never returns. For each
// session two cases follow add: its channels (nil once closed: ignored)
// and its requests.
func (w *watcher) run(serve func(ss *session, first reflect.Value, isRequest, ok bool)) {
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w.add)}}
	var sessions []*session
	for {
		i, v, ok := reflect.Select(cases)
		if i == 0 {
			ss := v.Interface().(*session)
			var chans reflect.Value
			if ss.newChans != nil {
				chans = reflect.ValueOf(ss.newChans)
			}
			cases = append(cases,
				reflect.SelectCase{Dir: reflect.SelectRecv, Chan: chans},
				reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ss.reqs)})
			sessions = append(sessions, ss)
			continue
		}
		k := (i - 1) / 2
		ss := sessions[k]
		last := len(sessions) - 1
		sessions[k] = sessions[last]
		sessions[last] = nil
		sessions = sessions[:last]
		copy(cases[1+2*k:], cases[1+2*last:])
		clear(cases[1+2*last:])
		cases = cases[:1+2*last]
		go serve(ss, v, i%2 == 0, ok)
	}
}

// serveQueued serves a session's request or channel that its watcher
// received, then whatever else is queued, and gives the session back to
// its watcher; or, once its requests end (the connection is gone), ends
// it.
func (s *Server) serveQueued(ss *session, first reflect.Value, isRequest, ok bool) {
	var nc ssh.NewChannel
	var req *ssh.Request
	if isRequest {
		req, _ = first.Interface().(*ssh.Request)
	} else {
		nc, _ = first.Interface().(ssh.NewChannel)
	}
	for {
		switch {
		case isRequest && !ok:
			s.endSession(ss)
			return
		case isRequest:
			ss.serve(req)
		case !ok:
			ss.newChans = nil
		default:
			_ = nc.Reject(ssh.Prohibited, "tuna-edge opens channels; agents do not")
		}
		select {
		case nc, ok = <-ss.newChans:
			isRequest = false
		case req, ok = <-ss.reqs:
			isRequest = true
		default:
			ss.watcher.add <- ss
			return
		}
	}
}
