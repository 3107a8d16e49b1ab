package preflight

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"code.tuna.am/tuna/k8s-operator/chart"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/values"
	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	edgeclient "code.tuna.am/tuna/k8s-operator/edge/client"
)

// The edge checks: the API is reachable and accepts the operator's key
// with the right scope, and the SSH transport answers with the host key
// the API publishes.

type apiKey struct{ value, from string }

func (p *run) edge(ctx context.Context, r *chart.Rendered, key apiKey) {
	vals := p.o.Values
	if r != nil {
		vals = r.Values
	}
	apiURL := values.String(vals, "edge.apiURL")
	trust := edgeclient.Trust{Fingerprint: values.String(vals, "edge.apiFingerprint"), CABundle: []byte(values.String(vals, "edge.apiCABundle"))}
	if apiURL == "" {
		p.rep.Fail(CatEdge, "the edge API URL is set", "edge.apiURL is empty", "set edge.apiURL (or --edge-api-url) to the edge's control API, e.g. https://edge.example.com:8443")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	desc := "the edge API is reachable"
	if _, err := trust.TLSConfig(); err != nil {
		p.rep.Fail(CatEdge, desc, err.Error(), "set edge.apiFingerprint (--edge-api-fingerprint) to what `tuna-edge api-fingerprint` prints on the edge")
		p.rep.Warn(CatEdge, "the edge accepts the API key with scope "+apiwire.ScopeWrite, "not checked: the edge API TLS settings are invalid", "")
		p.rep.Warn(CatEdge, "the edge is reachable over SSH", "not checked: the edge API TLS settings are invalid", "")
		return
	}
	cl := edgeclient.New(apiURL, key.value, edgeclient.WithTrust(trust))
	info, infoErr := cl.Edge(ctx)
	var ae *apiwire.APIError
	reachable := infoErr == nil || errors.As(infoErr, &ae)
	if !reachable {
		p.rep.Fail(CatEdge, desc, fmt.Sprintf("%s: %v", apiURL, infoErr), unreachableHint(infoErr, trust))
		p.rep.Warn(CatEdge, "the edge accepts the API key with scope "+apiwire.ScopeWrite, "not checked: the edge API is unreachable", "")
		p.rep.Warn(CatEdge, "the edge is reachable over SSH", "not checked: the edge API is unreachable", "")
		return
	}
	detail := apiURL
	if info != nil && info.Version != "" {
		detail += ", edge " + info.Version
	}
	p.rep.OK(CatEdge, desc, detail)
	p.accessSupport(ctx, cl)

	desc = "the edge accepts the API key with scope " + apiwire.ScopeWrite
	if key.value == "" {
		p.rep.Warn(CatEdge, desc, "not checked: no API key here (the credentials come from an injector)", "pass --api-key or set TUNA_API_KEY to check the key")
	} else {
		who, err := cl.WhoAmI(ctx)
		switch {
		case err != nil && (apiwire.CodeOf(err) == apiwire.CodeUnauthorized || apiwire.CodeOf(err) == apiwire.CodeForbidden):
			p.rep.Fail(CatEdge, desc, fmt.Sprintf("the key from %s is not valid: %v", key.from, err), "create an API key with scope tunnels:write (tuna-edge keys create --scope tunnels:write) and put it in the credentials")
		case err != nil:
			p.rep.Fail(CatEdge, desc, err.Error(), "")
		case slices.Contains(who.Scopes, apiwire.ScopeFull):
			p.rep.Warn(CatEdge, desc, fmt.Sprintf("the key %s (from %s) has full access, more than the operator needs", who.KeyID, key.from),
				"create a key with only tunnels:write for the operator (tuna-edge keys create --scope tunnels:write --name tuna-operator)")
		case slices.Contains(who.Scopes, apiwire.ScopeWrite):
			p.rep.OK(CatEdge, desc, fmt.Sprintf("key %s from %s", who.KeyID, key.from))
		default:
			p.rep.Fail(CatEdge, desc, fmt.Sprintf("the key %s (from %s) has scopes [%s]: it cannot issue tunnel keys or reserve domains", who.KeyID, key.from, strings.Join(who.Scopes, ", ")),
				"the operator needs an API key with scope tunnels:write: create one (tuna-edge keys create --scope tunnels:write) and put it in the credentials")
		}
		if err == nil {
			p.ownerPrefix(vals, who, key)
			p.secretScope(vals, who, key)
		}
	}

	desc = "the edge is reachable over SSH"
	if infoErr != nil {
		p.rep.Warn(CatEdge, desc, "not checked: reading the SSH address and host key needs a valid API key", "")
		return
	}
	if err := checkSSH(ctx, info.SSHAddr, info.SSHHostKey); err != nil {
		var ce *CheckError
		if errors.As(err, &ce) {
			p.rep.Fail(CatEdge, desc, ce.Msg, ce.Hint)
		} else {
			p.rep.Fail(CatEdge, desc, err.Error(), "")
		}
		return
	}
	p.rep.OK(CatEdge, desc, info.SSHAddr+", host key matches the published one")
}

// ownerPrefix checks that a key bound to an owner prefix is bound to the
// operator's clusterID: the operator reserves and issues for owners
// "<clusterID>/<namespace>", which a key bound to another prefix refuses
// one by one.
func (p *run) ownerPrefix(vals map[string]any, who *apiwire.WhoAmI, key apiKey) {
	const desc = "the API key acts for this cluster's owners"
	id := values.String(vals, "clusterID")
	switch {
	case who.OwnerPrefix == "":
		p.rep.OK(CatEdge, desc, fmt.Sprintf("key %s is not bound to an owner prefix: it may act for any cluster's owners "+
			"(on an edge that several clusters share, bind each cluster's key: tuna-edge keys create --owner-prefix <clusterID>)", who.KeyID))
	case id == "":
		p.rep.Fail(CatEdge, desc, fmt.Sprintf("the key %s (from %s) is bound to owner prefix %q, but clusterID is not set: "+
			"the operator would act as the UID of kube-system, which the key refuses", who.KeyID, key.from, who.OwnerPrefix),
			fmt.Sprintf("set clusterID=%s", who.OwnerPrefix))
	case id != who.OwnerPrefix:
		p.rep.Fail(CatEdge, desc, fmt.Sprintf("the key %s (from %s) is bound to owner prefix %q, but clusterID is %q: the key refuses every owner %s/...",
			who.KeyID, key.from, who.OwnerPrefix, id, id),
			fmt.Sprintf("set clusterID=%s, or use a key bound to %s", who.OwnerPrefix, id))
	default:
		p.rep.OK(CatEdge, desc, fmt.Sprintf("key %s is bound to owner prefix %s, the clusterID", who.KeyID, id))
	}
}

// secretScope checks, with secretSync on, that the operator's key may read
// edge secrets for the SecretSyncs that use it.
func (p *run) secretScope(vals map[string]any, who *apiwire.WhoAmI, key apiKey) {
	if !values.Bool(vals, "secretSync.enabled") {
		return
	}
	desc := "the API key may read edge secrets for SecretSyncs"
	if v, ok := values.Get(vals, "secretSync.operatorKey").(bool); ok && !v {
		p.rep.OK(CatEdge, desc, "not needed: secretSync.operatorKey=false, every SecretSync brings its own key")
		return
	}
	if !slices.Contains(who.Scopes, apiwire.ScopeSecretsRead) && !slices.Contains(who.Scopes, apiwire.ScopeFull) {
		p.rep.Fail(CatEdge, desc, fmt.Sprintf("the key %s (from %s) has scopes [%s]: SecretSyncs without apiKeySecretRef cannot read edge secrets with it",
			who.KeyID, key.from, strings.Join(who.Scopes, ", ")),
			"give the operator a key with secrets:read as well (tuna-edge keys create --scope tunnels:write,secrets:read --name tuna-operator), or set secretSync.operatorKey=false")
		return
	}
	detail := fmt.Sprintf("key %s has %s", who.KeyID, apiwire.ScopeSecretsRead)
	if who.SecretPrefix != "" {
		detail += ", confined to secrets named " + who.SecretPrefix + "..."
	}
	p.rep.OK(CatEdge, desc, detail)
}

// checkSSH connects to the edge's SSH transport and completes the key
// exchange, checking that the host key is the one the API publishes. It
// offers no credentials: the refused login is expected.
func checkSSH(ctx context.Context, addr, hostKey string) error {
	want, _, _, _, err := ssh.ParseAuthorizedKey([]byte(hostKey))
	if err != nil {
		return &CheckError{Msg: fmt.Sprintf("the edge publishes an unreadable host key: %v", err), Hint: "check the edge's configuration"}
	}
	d := net.Dialer{}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return &CheckError{Msg: fmt.Sprintf("cannot connect to %s: %v", addr, err), Hint: "open the edge's SSH port to the cluster (the agent dials it), and check the edge's published ssh_addr"}
	}
	defer func() { _ = conn.Close() }() // the check is done; a failed close changes no answer
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	var got ssh.PublicKey
	cfg := &ssh.ClientConfig{
		User: "preflight",
		HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error {
			got = key
			return nil
		},
		Timeout: 10 * time.Second,
	}
	sc, _, _, err := ssh.NewClientConn(conn, addr, cfg)
	if err == nil {
		_ = sc.Close()
	}
	if got == nil {
		return &CheckError{Msg: fmt.Sprintf("%s did not complete an SSH handshake: %v", addr, err), Hint: "check that ssh_addr points at the edge's SSH listener"}
	}
	if string(got.Marshal()) != string(want.Marshal()) {
		return &CheckError{
			Msg:  fmt.Sprintf("%s presents host key %s, the edge API publishes %s", addr, ssh.FingerprintSHA256(got), ssh.FingerprintSHA256(want)),
			Hint: "something between you and the edge answers in its place, or the edge's ssh_addr is wrong",
		}
	}
	return nil
}
