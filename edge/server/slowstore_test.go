package server_test

import (
	"context"
	"errors"
	"net"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
)

// A bind that waits on a slow store holds up nothing else of its session.
// The store is a real etcd that lost quorum (two of its three members
// stopped): the bind's read waits out the store's timeout (5 s). Meanwhile
// the agent's session stays up although its own keepalives cannot pass
// the bind (SSH answers in order; the edge's keepalives show it is there),
// a channel the agent must not open is refused at once, not after the
// bind, and the bind then gets its retryable refusal on a live session.
func TestBindWaitingOnTheStoreHoldsUpNothing(t *testing.T) {
	c := startCluster(t, 1)
	e := c.nodes[0]
	agentKey := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "slow." + baseDomain})
	rawKey := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "raw." + baseDomain})
	// Logins read the store: both before quorum goes. The agent's
	// keepalive timeout (1 s) is far shorter than the bind's wait.
	agent, err := tunnelclient.Dial(context.Background(), tunnelclient.Config{Addr: e.SSHAddr(), Key: agentKey.Key, HostKey: e.HostKey(),
		KeepaliveInterval: 200 * time.Millisecond, KeepaliveTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.Close() })
	raw := rawSession(t, e.SSHAddr(), e.HostKey(), rawKey.Key)

	c.etcd.Stop(2)
	c.etcd.Stop(1)

	type answer struct {
		ok  bool
		err error
	}
	pending := make(chan answer, 1)
	go func() {
		ok, _, err := raw.SendRequest(protocol.BindRequestType, true, protocol.Marshal(protocol.BindRequest{Protocol: "http"}))
		pending <- answer{ok, err}
	}()
	// The edge is in the bind, waiting on the store, before the agent
	// opens the channel (else the session's loop could take the channel
	// first, whatever it does with binds).
	waitFor(t, "the edge to wait on the store in the bind", func() bool { return running("sshd.(*session).bindParsed") })
	_, _, err = raw.OpenChannel("tuna-not-allowed", nil)
	var oce *ssh.OpenChannelError
	if !errors.As(err, &oce) || oce.Reason != ssh.Prohibited {
		t.Fatalf("a channel the agent opened: %v, want it refused as prohibited", err)
	}
	if !running("sshd.(*session).bindParsed") {
		t.Fatal("the channel was refused only once the bind was done: the bind held up the session")
	}
	select {
	case a := <-pending:
		t.Fatalf("the channel was refused only after the bind was answered (%v, %v): the bind held up the session", a.ok, a.err)
	default:
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = agent.Bind(ctx, protocol.BindRequest{Protocol: "http"})
	var be *tunnelclient.BindError
	if !errors.As(err, &be) || be.Code != protocol.CodeStateUnavailable {
		t.Fatalf("a bind without quorum: %v, want a state_unavailable refusal on a live session", err)
	}
	select {
	case <-agent.Done():
		t.Fatalf("the session ended while its bind waited on the store: %v", agent.Err())
	default:
	}
	if a := <-pending; a.err != nil || a.ok {
		t.Fatalf("the raw session's bind: %v %v, want a refusal", a.ok, a.err)
	}
}

// running reports whether a goroutine of this process runs fn.
func running(fn string) bool {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	return strings.Contains(b.String(), fn)
}

// rawSession logs in with key as an agent does, with x/crypto/ssh alone,
// to send what tunnelclient never sends.
func rawSession(t *testing.T, addr, hostKey, key string) ssh.Conn {
	t.Helper()
	pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(hostKey))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	conn, chans, reqs, err := ssh.NewClientConn(nc, addr, &ssh.ClientConfig{User: protocol.SSHUser,
		Auth: []ssh.AuthMethod{ssh.Password(key)}, HostKeyCallback: ssh.FixedHostKey(pk)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	go ssh.DiscardRequests(reqs)
	go func() {
		for nc := range chans {
			_ = nc.Reject(ssh.Prohibited, "")
		}
	}()
	return conn
}
