package coalesce

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"io"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
)

// TestSSHChannelsOverCoalescedConns runs x/crypto/ssh, both ends over
// Conn on real TCP, with many channels at once each echoing its own
// numbered stream: every byte comes back once, in its channel's order,
// and the bursts were gathered into fewer system calls than packets.
func TestSSHChannelsOverCoalescedConns(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	w, p := pair(t)
	serverSide, clientSide := newGated(p), newGated(w)
	for _, g := range []*gated{serverSide, clientSide} {
		go func() {
			for range g.entered {
			}
		}()
	}

	srvCfg := &ssh.ServerConfig{NoClientAuth: true}
	srvCfg.AddHostKey(signer)
	served := make(chan error, 1)
	go func() {
		sc, chans, reqs, err := ssh.NewServerConn(New(serverSide), srvCfg)
		if err != nil {
			served <- err
			return
		}
		defer sc.Close()
		go ssh.DiscardRequests(reqs)
		var wg sync.WaitGroup
		for nc := range chans {
			ch, creqs, err := nc.Accept()
			if err != nil {
				continue
			}
			go ssh.DiscardRequests(creqs)
			wg.Go(func() {
				_, _ = io.Copy(ch, ch) // echo
				_ = ch.CloseWrite()
				_ = ch.Close()
			})
		}
		wg.Wait()
		served <- nil
	}()

	cc, chans, reqs, err := ssh.NewClientConn(New(clientSide), "edge", &ssh.ClientConfig{
		User: "agent", HostKeyCallback: ssh.FixedHostKey(signer.PublicKey()),
	})
	if err != nil {
		t.Fatal(err)
	}
	client := ssh.NewClient(cc, chans, reqs)

	const channels, messages = 32, 200
	var wg sync.WaitGroup
	for id := range channels {
		wg.Go(func() {
			ch, creqs, err := client.OpenChannel("echo", nil)
			if err != nil {
				t.Errorf("channel %d: %v", id, err)
				return
			}
			go ssh.DiscardRequests(creqs)
			var want bytes.Buffer
			for seq := range messages {
				fmt.Fprintf(&want, "channel %d message %d;", id, seq)
			}
			got := make(chan []byte, 1)
			go func() { b, _ := io.ReadAll(ch); got <- b }()
			// One message per write: one SSH packet each.
			for _, m := range bytes.SplitAfter(want.Bytes(), []byte(";")) {
				if len(m) == 0 {
					continue
				}
				if _, err := ch.Write(m); err != nil {
					t.Errorf("channel %d: write: %v", id, err)
					return
				}
			}
			_ = ch.CloseWrite()
			if b := <-got; !bytes.Equal(b, want.Bytes()) {
				t.Errorf("channel %d: echoed %d bytes, want %d (first difference at %d)", id, len(b), want.Len(), firstDiff(b, want.Bytes()))
			}
			_ = ch.Close()
		})
	}
	wg.Wait()
	_ = client.Close()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	packets := channels * messages
	if calls := len(clientSide.calls()); calls >= packets {
		t.Errorf("the client made %d system calls for at least %d packets: nothing was gathered", calls, packets)
	} else {
		t.Logf("client: %d system calls for %d data packets and the channels' control packets; server: %d", calls, packets, len(serverSide.calls()))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
