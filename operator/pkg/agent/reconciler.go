package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/proxy"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/session"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/apikey"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/keysecret"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/upstream"
)

// resync re-reads each tunnel's Service, and the Secret of a tunnel's own
// key (spec.apiKeySecretRef), this often: the agent may only `get` Services
// and Secrets (R21), so it cannot watch them. A changed own key is thus
// picked up within resync, and the session reconnects with it.
const resync = 30 * time.Second

// resyncRate bounds those re-reads over all of an agent's Tunnels, in
// Tunnels a second: each costs two GETs and a TLS handshake with an https
// upstream. Above resyncRate × resync Tunnels (600) the period grows with
// their count: at 10,000 a fixed 30 s asked for 333 reconciles a second,
// more than the agent and the apiserver could serve, so the queue never
// drained and the Tunnels listed at start (queued behind every resync, at
// the priority queue's low priority) were never opened after a restart.
const resyncRate = 20

// resyncAfter is when a tunnel is re-read next: resync, or longer for an
// agent serving more than 600 Tunnels, up to a fifth sooner at random so
// that Tunnels created together do not come due together (sooner, not
// later: "at least every 30 s" stays true).
func (r *Reconciler) resyncAfter() time.Duration {
	p := resyncPeriod(r.tunnels.Load())
	return p - rand.N(p/5)
}

// resyncPeriod is the period for n Tunnels: resync, or n/resyncRate seconds.
func resyncPeriod(n int64) time.Duration {
	return max(resync, time.Duration(n)*time.Second/resyncRate)
}

// DefaultWorkers is the Tunnel reconciler's concurrency unless
// --concurrency asks for more. A reconcile mostly waits on the apiserver
// (a Service and a Secret read, a status write, each a round trip): with
// 4 workers, 10,000 Tunnels applied at once queued behind reconciles of
// 160 ms each while the agent used a tenth of a core.
const DefaultWorkers = 16

// Reconciler runs and reports the tunnel of each Tunnel resource.
type Reconciler struct {
	// Client reads Tunnels from the cache and writes their status.
	Client client.Client
	// Reader reads Services and Secrets directly, with `get` only.
	Reader    client.Reader
	Namespace string // the operator's namespace, where key Secrets live
	// AllowExternalUpstreams lifts the upstream policy (R18).
	AllowExternalUpstreams bool
	Registry               *Registry
	Recorder               recorder.EventRecorder
	// Edge tunes the transport (keepalives, timeouts); Addr, Key and
	// HostKey come from each tunnel's key Secret.
	Edge tunnelclient.Config
	// Replica names this agent replica in status.agents (its pod name);
	// Replicas is how many replicas run, for the Degraded condition.
	Replica  string
	Replicas int
	// Workers is how many Tunnels are reconciled at once (0: the
	// manager's --concurrency).
	Workers int
	// Controller tells whether the controller runs, so that a new Tunnel
	// it is about to take shows no KeyPending (nil: it is not known).
	Controller *ControllerLease

	transitions status.Transitions
	// tunnels counts the Tunnels in the cache, for resyncAfter.
	tunnels atomic.Int64
	// reads keeps each Tunnel's last reads of its Service and key Secret.
	reads reads
}

// SetupWithManager registers the reconciler: it follows Tunnels (spec and
// the controller's status) and the state changes of running tunnels.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	inf, err := mgr.GetCache().GetInformer(context.Background(), &tunav1.Tunnel{})
	if err != nil {
		return fmt.Errorf("the Tunnel informer: %w", err)
	}
	// The informer's own count, cheap on every reconcile (a List of 10,000
	// would not be): the initial list adds each Tunnel once.
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { r.tunnels.Add(1) },
		DeleteFunc: func(any) { r.tunnels.Add(-1) },
	}); err != nil {
		return fmt.Errorf("counting Tunnels: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("tunnel-agent").
		For(&tunav1.Tunnel{}).
		WatchesRawSource(r.Registry.Wakes()).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Workers}).
		Complete(r)
}

// Reconcile converges one tunnel and writes its Ready condition and url.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var tun tunav1.Tunnel
	if err := r.Client.Get(ctx, req.NamespacedName, &tun); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !tun.DeletionTimestamp.IsZero() {
		r.forget(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	if wait, quiet := r.awaitingKey(ctx, &tun); quiet {
		return reconcile.Result{RequeueAfter: wait}, nil
	}

	up, cfg, ok := r.reads.fresh(req.NamespacedName, &tun, time.Now())
	if !ok {
		r.reads.forget(req.NamespacedName)
		readAt, within := time.Now(), freshFor(r.tunnels.Load())
		// The upstream policy, the key, then the Service: while the key is
		// pending (the controller has not issued it, or refused), the
		// Service is not read at all.
		target, err := upstream.Parse(tun.Spec.Upstream.URL, string(tun.Spec.Protocol), tun.Namespace, r.AllowExternalUpstreams)
		if err != nil {
			return r.refused(ctx, &tun, err)
		}
		var pending *session.State
		cfg, pending, err = r.connection(ctx, &tun)
		if err != nil {
			return reconcile.Result{}, err
		}
		if pending != nil {
			r.Registry.Stop(req.NamespacedName)
			var again reconcile.Result
			if tun.Spec.APIKeySecretRef != nil {
				// The user's Secret may appear or be fixed later; no event
				// tells us, so look again.
				again.RequeueAfter = r.resyncAfter()
			}
			return again, r.report(ctx, &tun, *pending)
		}
		if up, err = r.resolve(ctx, &tun, target); err != nil {
			return r.refused(ctx, &tun, err)
		}
		r.reads.store(req.NamespacedName, &tun, readAt, within, up, cfg)
	}
	if running := r.Registry.Get(req.NamespacedName); running != nil && tun.Spec.APIKeySecretRef != nil &&
		running.Config().Edge.Key != cfg.Edge.Key {
		// Only the public id: the key itself is never logged.
		log.FromContext(ctx).Info("the key of spec.apiKeySecretRef changed, reconnecting with it",
			"keyID", apikey.ID(cfg.Edge.Key), "previousKeyID", apikey.ID(running.Config().Edge.Key))
	}
	t := r.Registry.Ensure(req.NamespacedName, cfg, up)
	age, opening := t.Opening()
	if wait, quiet := openingQuietly(&tun, age, opening); quiet {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	st, err := r.checkTCPPolicy(ctx, &tun, checkTLS(ctx, up, t.State()))
	if err != nil {
		return reconcile.Result{}, err
	}
	again := r.resyncAfter()
	if st.Reason == tunav1.ReasonTCPNeedsIPRules {
		again = policyRecheck
	}
	return reconcile.Result{RequeueAfter: again}, r.report(ctx, &tun, st)
}

// awaitingKey is awaitingKey with this agent's view of the controller:
// the Lease is read only for a Tunnel without conditions.
func (r *Reconciler) awaitingKey(ctx context.Context, tun *tunav1.Tunnel) (time.Duration, bool) {
	if len(tun.Status.Conditions) > 0 {
		return 0, false
	}
	now := time.Now()
	return awaitingKey(tun, now, r.Controller.AliveUntil(ctx, now))
}

// policyRecheck is how soon a tcp Tunnel whose policy it cannot take looks
// at the policy again: the agent only gets policies, it does not watch
// them, and a fixed policy should show in Ready within seconds.
const policyRecheck = 5 * time.Second

// checkTCPPolicy shows in Ready that the edge refuses every connection to
// a connected tcp Tunnel whose access policy has rules other than ip rules
// (TCPNeedsIPRules), as the policy's own status says; the tunnel stays up,
// and an ip-only policy takes effect without a reconnect. The policy is
// read with get (no watch): a policy that becomes one a TCP address cannot
// take shows within resync, a fixed one within policyRecheck.
func (r *Reconciler) checkTCPPolicy(ctx context.Context, tun *tunav1.Tunnel, st session.State) (session.State, error) {
	ref := tun.Spec.AccessPolicyRef
	if tun.Spec.Protocol != tunav1.ProtocolTCP || ref == nil || st.Phase != session.PhaseConnected {
		return st, nil
	}
	var p tunav1.AccessPolicy
	if err := r.Reader.Get(ctx, types.NamespacedName{Namespace: tun.Namespace, Name: ref.Name}, &p); err != nil {
		// A missing policy is refused at the edge like any other address's
		// and said on the policy side; nothing more to tell here.
		return st, client.IgnoreNotFound(err)
	}
	if p.Spec.IPOnly() {
		return st, nil
	}
	st.Phase, st.Reason = session.PhaseConnecting, tunav1.ReasonTCPNeedsIPRules
	st.Message = fmt.Sprintf("the tunnel is published at %s, but the edge refuses every connection: access policy %s has rules "+
		"other than ip rules without pathPrefixes or methods, which a TCP address cannot take", st.URL, ref.Name)
	return st, nil
}

// forget stops the tunnel of a Tunnel that goes and drops what the
// reconciler remembered of it.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.Registry.Stop(key)
	r.transitions.Forget(key)
	r.reads.forget(key)
}

// refused stops the tunnel of a Tunnel whose upstream is refused (an
// upstream.Refusal: the policy, a missing Service) and reports why; any
// other error is retried.
func (r *Reconciler) refused(ctx context.Context, tun *tunav1.Tunnel, err error) (reconcile.Result, error) {
	var ref *upstream.Refusal
	if !errors.As(err, &ref) {
		return reconcile.Result{}, err
	}
	r.Registry.Stop(client.ObjectKeyFromObject(tun))
	// A missing Service may appear later; poll, since we cannot watch.
	return reconcile.Result{RequeueAfter: r.resyncAfter()}, r.report(ctx, tun, notReady(ref.Reason, ref.Message))
}

// resolve finds the address of a target the upstream policy allowed
// (upstream.Parse), and how to speak to it: cleartext HTTP/2 for an
// h2c:// URL or a Service port of appProtocol h2c, and for https:// the
// TLS settings of spec.upstream.tls (its CA bundle read with get).
func (r *Reconciler) resolve(ctx context.Context, tun *tunav1.Tunnel, target upstream.Target) (proxy.Upstream, error) {
	addr, port, err := upstream.ResolvePort(ctx, r.Reader, tun.Namespace, target, r.AllowExternalUpstreams)
	if err != nil {
		return proxy.Upstream{}, err
	}
	up := proxy.Upstream{Scheme: target.Scheme, Addr: addr, Display: target.Host + ":" + target.PortString()}
	switch {
	case up.Scheme == "http" && upstream.AppScheme(port) == upstream.SchemeH2C:
		up.Scheme = proxy.SchemeH2C
	case up.Scheme == "https":
		settings, err := upstream.TLS(ctx, r.Reader, tun.Namespace, target, tlsOptions(tun.Spec.Upstream.TLS))
		if err != nil {
			return proxy.Upstream{}, err
		}
		up.TLS = (*proxy.TLS)(settings)
	}
	return up, nil
}

// tlsOptions turns spec.upstream.tls into the upstream package's options.
func tlsOptions(t *tunav1.UpstreamTLS) upstream.TLSOptions {
	if t == nil {
		return upstream.TLSOptions{}
	}
	o := upstream.TLSOptions{ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	if ref := t.CARef; ref != nil {
		o.CA = &upstream.CARef{Kind: string(ref.Kind), Name: ref.Name, Key: ref.Key}
	}
	return o
}

// checkTLS completes a handshake with a connected https upstream, so that
// a certificate that does not verify shows in Ready (UpstreamTLSFailed)
// rather than only in 502 answers. The tunnel stays up: the cause is in
// the upstream's certificate or in spec.upstream.tls, and fixing either
// takes effect without a reconnect. A backend that does not answer is not
// a TLS failure and changes nothing here.
func checkTLS(ctx context.Context, up proxy.Upstream, st session.State) session.State {
	if up.Scheme != "https" || st.Phase != session.PhaseConnected {
		return st
	}
	var te *proxy.TLSError
	if err := proxy.CheckTLS(ctx, up.Addr, up.TLS); errors.As(err, &te) {
		st.Phase, st.Reason = session.PhaseConnecting, tunav1.ReasonUpstreamTLSFailed
		st.Message = fmt.Sprintf("the tunnel is published at %s, but requests fail (502): upstream %s (%s) %s", st.URL, up.Display, up.Addr, te.Error())
	}
	return st
}

// connection reads the tunnel's key from its Secret. It returns a pending
// state instead when the controller has not issued a usable key (yet).
func (r *Reconciler) connection(ctx context.Context, tun *tunav1.Tunnel) (session.Config, *session.State, error) {
	issued := status.Find(tun.Status.Conditions, tunav1.ConditionKeyIssued)
	if issued == nil {
		st := notReady(tunav1.ReasonKeyPending, "waiting for the operator's controller to issue a tunnel key")
		return session.Config{}, &st, nil
	}
	// Unknown means the controller cannot reach the edge API and keeps the
	// key it had: a control-plane failure must not stop a tunnel that
	// serves traffic, so the agent goes on with the recorded key. Only
	// False (no usable key), a revocation or a refused bind stop it.
	usable := issued.Status == metav1.ConditionTrue ||
		issued.Status == metav1.ConditionUnknown && (tun.Status.KeyID != "" || tun.Spec.APIKeySecretRef != nil)
	if !usable {
		st := notReady(issued.Reason, issued.Message)
		return session.Config{}, &st, nil
	}
	var secret corev1.Secret
	key := types.NamespacedName{Namespace: r.Namespace, Name: keysecret.Name("Tunnel", tun.UID)}
	if err := r.Reader.Get(ctx, key, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			st := notReady(tunav1.ReasonKeyPending, "waiting for the tunnel key Secret "+key.String())
			return session.Config{}, &st, nil
		}
		return session.Config{}, nil, fmt.Errorf("reading key Secret %s: %w", key, err)
	}
	c := keysecret.Read(&secret)
	if c.KeyID != tun.Status.KeyID {
		st := notReady(tunav1.ReasonKeyPending, "waiting for the new tunnel key to be handed over")
		return session.Config{}, &st, nil
	}
	if ref := tun.Spec.APIKeySecretRef; ref != nil {
		own, pending, err := r.ownKey(ctx, tun.Namespace, ref.Name)
		if pending != nil || err != nil {
			return session.Config{}, pending, err
		}
		c.TunnelKey = own
	}
	edge := r.Edge
	edge.Addr, edge.Key, edge.HostKey = c.SSHAddr, c.TunnelKey, c.HostKey
	return session.Config{Edge: edge, Bind: bindRequest(tun, c.Address)}, nil, nil
}

// ownKey reads the user's key from spec.apiKeySecretRef (field api-key).
func (r *Reconciler) ownKey(ctx context.Context, namespace, name string) (string, *session.State, error) {
	var s corev1.Secret
	if err := r.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			st := notReady(tunav1.ReasonAPIKeyInvalid, fmt.Sprintf("Secret %s/%s of spec.apiKeySecretRef does not exist: create it with the field api-key", namespace, name))
			return "", &st, nil
		}
		return "", nil, fmt.Errorf("reading Secret %s/%s: %w", namespace, name, err)
	}
	key := strings.TrimSpace(string(s.Data[APIKeyField]))
	if key == "" {
		st := notReady(tunav1.ReasonAPIKeyInvalid, fmt.Sprintf("Secret %s/%s has no field %s: put a key with the tunnels:connect scope there", namespace, name, APIKeyField))
		return "", &st, nil
	}
	return key, nil, nil
}

// APIKeyField is the field of a user's Secret that holds the key (R2).
const APIKeyField = "api-key"

// bindRequest asks for the address the controller resolved (a subdomain, a
// Domain's full name, or a TCP alias or port).
func bindRequest(tun *tunav1.Tunnel, address string) protocol.BindRequest {
	b := protocol.BindRequest{
		Protocol:      string(tun.Spec.Protocol),
		AllowCIDRs:    tun.Spec.AllowCIDRs,
		DenyCIDRs:     tun.Spec.DenyCIDRs,
		ProxyProtocol: tun.Spec.ProxyProtocol,
	}
	if ref := tun.Spec.AccessPolicyRef; ref != nil {
		// The edge enforces the namespace's policy of this name, and
		// refuses every request until it has it.
		b.AccessPolicy = ref.Name
	}
	switch {
	case tun.Spec.Protocol == tunav1.ProtocolTCP:
		b.Alias = address
	case strings.Contains(address, "."):
		b.Domain = address
	default:
		b.Subdomain = address
	}
	return b
}

func notReady(reason, msg string) session.State {
	return session.State{Phase: session.PhaseConnecting, Reason: reason, Message: msg}
}

// report writes this replica's entry in status.agents under its own
// field manager, then the pool status merged from every entry (Ready, url,
// sessionID, sessions, Degraded) under the shared one. An event is
// recorded when the merged Ready changes: one per transition, never one
// per resync.
func (r *Reconciler) report(ctx context.Context, tun *tunav1.Tunnel, st session.State) error {
	own := entryOf(r.replica(), st)
	if i := slices.IndexFunc(tun.Status.Agents, func(e tunav1.TunnelAgentStatus) bool { return e.Name == own.Name }); i < 0 || tun.Status.Agents[i] != own {
		entry, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&own)
		if err != nil {
			return fmt.Errorf("encoding the agent entry of %s: %w", own.Name, err)
		}
		if err := status.Apply(ctx, r.Client, tunav1.GroupVersion.WithKind("Tunnel"), client.ObjectKeyFromObject(tun), r.replicaOwner(), status.Fields{
			Values: map[string]any{"agents": []any{entry}},
		}); err != nil {
			return err
		}
	}
	return r.writePool(ctx, tun, withEntry(tun.Status.Agents, own))
}

// writePool applies the status merged from entries, if it changed.
func (r *Reconciler) writePool(ctx context.Context, tun *tunav1.Tunnel, entries []tunav1.TunnelAgentStatus) error {
	p := MergePool(entries, r.Replicas)
	cond := status.Condition(tun.Status.Conditions, tunav1.ConditionReady, p.Ready, p.Reason, p.Message, tun.Generation)
	degraded := status.Condition(tun.Status.Conditions, tunav1.ConditionDegraded, p.Degraded, p.DegradedReason, p.DegradedMessage, tun.Generation)
	old := status.Find(tun.Status.Conditions, tunav1.ConditionReady)
	if status.Same(old, cond) && status.Same(status.Find(tun.Status.Conditions, tunav1.ConditionDegraded), degraded) &&
		tun.Status.URL == p.URL && tun.Status.SessionID == p.SessionID && tun.Status.Sessions == p.Sessions &&
		tun.Status.ObservedGeneration == tun.Generation {
		return nil
	}
	err := status.Apply(ctx, r.Client, tunav1.GroupVersion.WithKind("Tunnel"), client.ObjectKeyFromObject(tun), status.AgentFieldOwner, status.Fields{
		Conditions: []metav1.Condition{cond, degraded},
		Values: map[string]any{"url": p.URL, "sessionID": p.SessionID, "sessions": int64(p.Sessions),
			"observedGeneration": tun.Generation},
	})
	if err != nil {
		return err
	}
	if r.transitions.Changed(tun, old, cond) {
		if cond.Status == metav1.ConditionTrue {
			r.Recorder.Eventf(tun, nil, corev1.EventTypeNormal, cond.Reason, "Connect", "Tunnel connected at %s", p.URL)
		} else if cond.Reason != tunav1.ReasonKeyPending && cond.Reason != tunav1.ReasonConnecting {
			r.Recorder.Eventf(tun, nil, corev1.EventTypeWarning, cond.Reason, "Connect", "%s", cond.Message)
		}
	}
	return nil
}

// replica is this agent replica's name in status.agents.
func (r *Reconciler) replica() string {
	if r.Replica == "" {
		return "agent"
	}
	return r.Replica
}

// replicaOwner is the field manager of this replica's own entry: a
// manager per replica, so that server-side apply keeps each replica's
// entry apart and drops it when the replica applies it no more.
func (r *Reconciler) replicaOwner() string { return status.AgentEntryOwner(r.replica()) }

// Leave removes this replica's entry from every Tunnel and rewrites the
// merged status without it, so that a replica that shuts down stops
// counting as a live session before it drains. It reads with the API
// reader: the cache stops with the manager.
func (r *Reconciler) Leave(ctx context.Context) error {
	var list tunav1.TunnelList
	if err := r.Reader.List(ctx, &list); err != nil {
		return fmt.Errorf("listing Tunnels: %w", err)
	}
	var errs []error
	for i := range list.Items {
		tun := &list.Items[i]
		if !slices.ContainsFunc(tun.Status.Agents, func(e tunav1.TunnelAgentStatus) bool { return e.Name == r.replica() }) {
			continue
		}
		if err := status.RemoveAgentEntry(ctx, r.Client, client.ObjectKeyFromObject(tun), r.replica()); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := r.writePool(ctx, tun, withoutEntry(tun.Status.Agents, r.replica())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
