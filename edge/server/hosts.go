package server

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"

	"golang.org/x/crypto/ssh"

	"code.tuna.am/tuna/k8s-operator/edge/names"
	"code.tuna.am/tuna/k8s-operator/edge/store"
)

// loadHostKey returns the stored SSH host key, generating and storing an
// ed25519 key on first start. Agents pin it, so it must never change on
// restart.
func loadHostKey(st *store.Store) (ssh.Signer, error) {
	data, err := st.HostKey()
	if err == nil {
		s, err := ssh.ParsePrivateKey(data)
		if err != nil {
			return nil, fmt.Errorf("parsing stored SSH host key: %w", err)
		}
		return s, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("reading SSH host key: %w", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating SSH host key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "tuna-edge host key")
	if err != nil {
		return nil, fmt.Errorf("encoding SSH host key: %w", err)
	}
	pemBytes := pem.EncodeToMemory(block)
	if err := st.SetHostKey(pemBytes); err != nil {
		return nil, fmt.Errorf("storing SSH host key: %w", err)
	}
	return ssh.ParsePrivateKey(pemBytes)
}

// knownHost decides 502 (ours, not connected) against 404 (not ours) for a
// host without a live route. It runs only on that miss path, so scanning
// the tunnel keys (a few per tunnel) costs nothing on routed requests.
func (e *Edge) knownHost(host string) bool {
	if _, err := e.st.GetDomain(host); err == nil {
		return true
	}
	tks, err := e.st.ListTunnelKeys()
	if err != nil {
		return false
	}
	for _, k := range tks {
		if k.Protocol == "http" && k.Address == host {
			return true
		}
	}
	return false
}

// acmeHostPolicy lets ACME issue certificates only for names the edge
// serves: single-label subdomains and verified custom domains.
func (e *Edge) acmeHostPolicy(_ context.Context, host string) error {
	host = names.Normalize(host)
	if _, ok := names.SubdomainOf(host, e.cfg.BaseDomain); ok || host == e.cfg.BaseDomain {
		return nil
	}
	if d, err := e.st.GetDomain(host); err == nil && (!d.Custom || d.Verified) {
		return nil
	}
	return fmt.Errorf("tuna-edge does not serve %s", host)
}
