// Package hosttunnel is the agent's part of published hosts (the hosts of
// Ingress rules of the class tuna and of Gateway listeners,
// operator/pkg/pubhost): one tunnel per host (R4), whose handler routes
// the host's Ingress paths and attached HTTPRoute rules. Route changes (paths added
// or removed, backends changed, Services re-resolved) build a new immutable
// route table that is swapped into the running router: the tunnel's session
// is never touched, so nothing reconnects and no request fails.
//
// Requests are hosts: every Ingress event wakes the hosts of the Ingress
// before and after the change, and the host's reconcile merges all served
// Ingresses with a rule for it (the oldest wins a conflicting path).
package hosttunnel

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/proxy"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/router"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/session"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/ingress"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/keysecret"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/metrics"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/upstream"
)

// Event reasons on Ingresses (R17); PathConflict goes beyond the seeds,
// which leave Ingresses sharing a host unreconciled.
const (
	ReasonTunnelConnected = "TunnelConnected"
	ReasonTunnelStopped   = "TunnelStopped"
	ReasonRoutesUpdated   = "RoutesUpdated"
	ReasonBackendSkipped  = "BackendSkipped"
	ReasonPathConflict    = "PathConflict"
	// ReasonUpstreamTLSFailed: an https backend's certificate does not
	// verify with the Ingress's k8s.tuna.am/upstream-* annotations.
	ReasonUpstreamTLSFailed = tunav1.ReasonUpstreamTLSFailed
)

// Reconciler runs the tunnel of every served Ingress host.
type Reconciler struct {
	// Client reads Ingresses and IngressClasses from the cache and writes
	// Ingress status.
	Client client.Client
	// Reader reads Services and key Secrets directly, with `get` only.
	Reader    client.Reader
	Namespace string // the operator's namespace, where key Secrets live
	// AllowExternalUpstreams lifts the upstream policy (R18).
	AllowExternalUpstreams bool
	Registry               *agent.Registry
	Recorder               recorder.EventRecorder
	// Edge tunes the transport; Addr, Key and HostKey come from the host's
	// key Secret.
	Edge tunnelclient.Config
	// Resync re-resolves each host's Services this often (default 30s):
	// the agent may not watch Services (R21).
	Resync time.Duration

	wakes agent.Waker
	// ctl is the running controller, which ServeGateways and
	// ServeBackendTLSPolicies give more watches.
	ctl controller.Controller
	// gateways serves HTTPRoutes of the operator's Gateways on their hosts
	// too, once the Gateway API's CRDs are installed (ServeGateways);
	// tlsPolicies verifies https backendRefs by their BackendTLSPolicy once
	// its CRD is (ServeBackendTLSPolicies).
	gateways, tlsPolicies atomic.Bool

	mu    sync.Mutex
	hosts map[string]*hostState
	// sliceWakes: the hosts that dial an endpoint of a headless Service,
	// or wait for a missing one, woken when its EndpointSlices change.
	sliceWakes sliceWakes

	notes ingress.Notes
	// toldAccess remembers the last refusal of an access policy
	// attachment told on each object (access.go).
	toldAccess sync.Map

	statusMu sync.Mutex
	written  map[types.NamespacedName]written // the loadBalancer hostnames last applied

	// othersSince: the hosts published only by namespaces their key
	// Secret does not name, since when (recheckOthers).
	othersSince sync.Map // host -> time.Time
}

// hostState is what the agent keeps of one served host between
// reconciles: its router (the tunnel's handler for the host's whole life),
// the signature of the table in it, and what it reported.
type hostState struct {
	router       *router.Router
	sig          string
	contributors map[types.UID]*networkingv1.Ingress
	connected    bool
	lbHostname   string
	pendingSince time.Time
}

// registryKey names a host's tunnel in the agent's registry. Tunnels are
// keyed by namespace/name; an empty namespace never collides with them.
func registryKey(host string) types.NamespacedName { return types.NamespacedName{Name: host} }

func (r *Reconciler) resync() time.Duration {
	if r.Resync <= 0 {
		return 30 * time.Second
	}
	return r.Resync
}

// Reconcile converges one host.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if !pubhost.IsRequest(req) {
		return reconcile.Result{}, nil
	}
	host := req.Name
	served, err := ingress.Source.ServedFor(ctx, r.Client, host)
	if err != nil {
		return reconcile.Result{}, err
	}
	publishers := len(served)
	served, allowed, err := r.tenants(ctx, host, served)
	if err != nil {
		return reconcile.Result{}, err
	}
	merged := ingress.Merge(host, served)
	gwRules, gwOthers, err := r.gatewayRules(ctx, host, allowed)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(merged.Ingresses) == 0 && len(gwRules) == 0 {
		r.stop(ctx, host)
		if publishers > len(served) || gwOthers {
			return reconcile.Result{RequeueAfter: r.recheckOthers(host)}, nil
		}
		r.forgetOthers(host)
		return reconcile.Result{}, nil
	}
	r.forgetOthers(host)
	entries, err := r.resolve(ctx, merged)
	if err != nil {
		return reconcile.Result{}, err
	}
	h, former := r.state(host, merged.Ingresses)
	r.applyRoutes(host, h, entries, gwRules)
	r.sliceWakes.set(host, sliceServices(entries, gwRules))

	var routes []*gwv1.HTTPRoute
	for _, e := range gwRules {
		if !slices.Contains(routes, e.rule.Route) {
			routes = append(routes, e.rule.Route)
		}
	}
	cfg, lb, pending, err := r.connection(ctx, host, func(owner string) string {
		return r.accessPolicy(host, owner, merged.Ingresses, routes)
	})
	if err != nil {
		return reconcile.Result{}, err
	}
	if pending == "" {
		// Route events only for a host that is published: one waiting for
		// its key (not a reserved domain, say) has RuleSkipped to tell.
		r.reportRoutes(merged, entries)
	}
	var st session.State
	if pending != "" {
		if r.Registry.Get(registryKey(host)) != nil {
			r.Registry.Stop(registryKey(host))
		}
		st = session.State{Phase: session.PhaseConnecting, Message: pending}
	} else {
		t := r.Registry.EnsureHandler(registryKey(host), cfg, h.router, func() { r.wake(host) })
		st = t.State()
	}
	delay := r.reportConnection(host, h, merged.Ingresses, st, lb, pending)
	r.writeStatus(ctx, append(keysOf(merged.Ingresses), former...))
	return reconcile.Result{RequeueAfter: delay}, nil
}

// entry is one route of the host, resolved.
type entry struct {
	route ingress.Route
	up    proxy.Upstream
	// skip says why the backend is not served ("" when it is).
	skip string
	// tls says why an https backend's certificate does not verify; the
	// route is served (and answers 502) while it does not.
	tls string
	// slicesOf is the Service whose EndpointSlices wake the host
	// (upstream.Resolution.FollowsSlices; zero for a ClusterIP).
	slicesOf types.NamespacedName
}

// resolve finds each route's Service address (R18 policy applied), and for
// https backends the TLS settings of the route's own Ingress.
func (r *Reconciler) resolve(ctx context.Context, merged ingress.Host) ([]entry, error) {
	out := make([]entry, 0, len(merged.Routes))
	checked := map[string]string{} // addr|digest -> TLS problem, one handshake per backend
	for _, rt := range merged.Routes {
		e := entry{route: rt}
		b := rt.Backend
		what := fmt.Sprintf("%s of host %s: backend %s", rt.Pattern(), merged.Name, ingress.BackendString(b))
		if b.Service == nil {
			e.skip = what + " is not a Service: only Service backends are published"
			out = append(out, e)
			continue
		}
		t := upstream.Target{Scheme: "http", Host: b.Service.Name, Service: b.Service.Name, Namespace: rt.Ingress.Namespace,
			Port: b.Service.Port.Number, PortName: b.Service.Port.Name}
		res, err := upstream.ResolveService(ctx, r.Reader, rt.Ingress.Namespace, t, r.AllowExternalUpstreams)
		if res.FollowsSlices() {
			e.slicesOf = types.NamespacedName{Namespace: rt.Ingress.Namespace, Name: b.Service.Name}
		}
		if err == nil {
			e.up = proxy.Upstream{Scheme: schemeOf(res.Port), Addr: res.Addr, Display: ingress.BackendString(b)}
			if e.up.Scheme == "https" {
				e.up.TLS, err = r.backendTLS(ctx, rt.Ingress, t)
			}
		}
		var ref *upstream.Refusal
		switch {
		case errors.As(err, &ref):
			e.skip = what + " skipped: " + strings.ReplaceAll(ref.Message, "fix upstream.url", "fix the Ingress backend")
		case err != nil:
			return nil, err
		case e.up.Scheme == "https":
			k := e.up.Addr + "|" + e.up.TLS.Digest()
			problem, ok := checked[k]
			if !ok {
				var te *proxy.TLSError
				if err := proxy.CheckTLS(ctx, e.up.Addr, e.up.TLS); errors.As(err, &te) {
					problem = te.Error()
				}
				checked[k] = problem
			}
			if problem != "" {
				e.tls = what + " answers 502: " + problem
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// backendTLS is how an https backend of ing is checked: the Ingress's
// k8s.tuna.am/upstream-* annotations, the CA bundle read from its
// namespace.
func (r *Reconciler) backendTLS(ctx context.Context, ing *networkingv1.Ingress, t upstream.Target) (*proxy.TLS, error) {
	o, err := upstream.TLSAnnotations(ing.Annotations)
	if err != nil {
		return nil, err
	}
	settings, err := upstream.TLS(ctx, r.Reader, ing.Namespace, t, o)
	return (*proxy.TLS)(settings), err
}

// schemeOf picks how to speak to a Service port by its appProtocol.
func schemeOf(p *corev1.ServicePort) string {
	if s := upstream.AppScheme(p); s != "" {
		return s
	}
	return "http"
}

func (e entry) signature() string {
	return e.route.Pattern() + "|" + e.up.Scheme + "://" + e.up.Addr + "|" + e.up.Display + "|" + e.up.TLS.Digest() + "|" + e.skip
}

// state returns the host's state, creating it (and its router) for a new
// host, records the Ingresses that now serve it, and returns the keys of
// those that served it before and no longer do.
func (r *Reconciler) state(host string, ings []*networkingv1.Ingress) (*hostState, []types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hosts == nil {
		r.hosts = map[string]*hostState{}
	}
	h := r.hosts[host]
	if h == nil {
		h = &hostState{router: router.New(host, observer(host)), contributors: map[types.UID]*networkingv1.Ingress{}}
		r.hosts[host] = h
	}
	now := map[types.UID]*networkingv1.Ingress{}
	for _, ing := range ings {
		now[ing.UID] = metaOnly(ing)
	}
	var former []types.NamespacedName
	for uid, ing := range h.contributors {
		if now[uid] == nil {
			former = append(former, client.ObjectKeyFromObject(ing))
			r.pruneHost(ing, host) // what it was told about this host no longer holds
		}
	}
	h.contributors = now
	return h, former
}

// metaOnly keeps what events and status need of an Ingress.
func metaOnly(ing *networkingv1.Ingress) *networkingv1.Ingress {
	return &networkingv1.Ingress{TypeMeta: ing.TypeMeta, ObjectMeta: *ing.ObjectMeta.DeepCopy()}
}

func observer(host string) router.Observer {
	return func(route string, code int, took time.Duration) {
		if route == "" {
			route = "none"
		}
		metrics.IngressRequests.WithLabelValues(host, route, strconv.Itoa(code)).Inc()
		metrics.IngressRequestDuration.WithLabelValues(host).Observe(took.Seconds())
	}
}

// applyRoutes swaps a new table into the host's router when the routes
// changed. Requests in flight finish on the table they started with.
func (r *Reconciler) applyRoutes(host string, h *hostState, entries []entry, gwRules []gwEntry) {
	sigs := make([]string, 0, len(entries)+len(gwRules))
	for _, e := range entries {
		sigs = append(sigs, e.signature())
	}
	for _, e := range gwRules {
		sigs = append(sigs, e.signature())
	}
	sig := strings.Join(sigs, "\n")
	r.mu.Lock()
	defer r.mu.Unlock()
	if sig == h.sig {
		return
	}
	var routes []router.Route
	var fallback *router.Route
	for _, e := range entries {
		var handler http.Handler
		if e.skip != "" {
			handler = unavailable(host, e.route.Pattern())
		} else {
			handler = proxy.NewHTTP(e.up, nil)
		}
		rt := router.Route{Type: e.route.Type, Path: e.route.Path, Name: e.route.Pattern(), Handler: handler}
		if e.route.Default {
			fallback = &rt
			continue
		}
		routes = append(routes, rt)
	}
	for _, e := range gwRules {
		routes = append(routes, e.route())
	}
	table := router.NewTable(routes, fallback)
	h.router.Swap(table)
	h.sig = sig
	metrics.IngressRouteUpdates.WithLabelValues(host).Inc()
	metrics.IngressRoutes.WithLabelValues(host).Set(float64(table.Len()))
}

// unavailable answers for a route whose backend is skipped: 503, rather
// than letting a shorter prefix (another Service) answer for paths the
// Ingress gave to this one. The reason (namespace and Service names) is
// for the Ingress's events, not for the public.
func unavailable(host, pattern string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Tuna-Error", "backend-skipped")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "tuna: the backend of %s on host %s is not available; the Ingress's BackendSkipped event says why\n", pattern, host)
	})
}

// connection reads the host's key Secret. pending says why the host cannot
// connect yet. policy names the access policy the host's owner namespace
// attaches.
func (r *Reconciler) connection(ctx context.Context, host string, policy func(owner string) string) (cfg session.Config, lb, pending string, err error) {
	var secret corev1.Secret
	key := types.NamespacedName{Namespace: r.Namespace, Name: keysecret.HostName(host)}
	if err := r.Reader.Get(ctx, key, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return cfg, "", "waiting for the operator's controller to issue a tunnel key for host " + host +
				" (it does once the host is a reserved domain; see the Ingress's RuleSkipped events otherwise)", nil
		}
		return cfg, "", "", fmt.Errorf("reading key Secret %s: %w", key, err)
	}
	c := keysecret.Read(&secret)
	if c.TunnelKey == "" {
		return cfg, "", "the key Secret of host " + host + " holds no key yet", nil
	}
	edge := r.Edge
	edge.Addr, edge.Key, edge.HostKey = c.SSHAddr, c.TunnelKey, c.HostKey
	addr := c.Address
	if addr == "" {
		addr = host
	}
	lb = c.LBHostname
	if lb == "" {
		lb = host
	}
	bind := protocol.BindRequest{Protocol: protocol.ProtocolHTTP, Domain: addr, AccessPolicy: policy(c.Owner)}
	return session.Config{Edge: edge, Bind: bind}, lb, "", nil
}

// recheckOthers is when to look again at a host that only namespaces its
// key Secret does not name publish. The Secret may be about to name them:
// a Gateway address moves between namespaces by the Gateways' status
// first and the Secret's new key after, and the agent cannot watch
// Secrets, so no event would wake the host once the key is there. It
// polls, more rarely the longer it waits (a host another namespace owns
// for good is looked at every resync period).
func (r *Reconciler) recheckOthers(host string) time.Duration {
	v, _ := r.othersSince.LoadOrStore(host, time.Now())
	return min(max(time.Since(v.(time.Time))/4, 100*time.Millisecond), r.resync())
}

// forgetOthers ends the host's recheckOthers wait.
func (r *Reconciler) forgetOthers(host string) { r.othersSince.Delete(host) }

// stop closes the tunnel of a host no served Ingress has a rule for.
func (r *Reconciler) stop(ctx context.Context, host string) {
	r.sliceWakes.set(host, nil)
	r.mu.Lock()
	h := r.hosts[host]
	delete(r.hosts, host)
	r.mu.Unlock()
	r.Registry.Stop(registryKey(host))
	if h == nil {
		return
	}
	metrics.ForgetIngressHost(host)
	var keys []types.NamespacedName
	for _, ing := range h.contributors {
		keys = append(keys, client.ObjectKeyFromObject(ing))
		if _, ok := r.notes.Get(ing, "connected/"+host); ok {
			r.event(ing, corev1.EventTypeNormal, ReasonTunnelStopped, "Disconnect", "connected/"+host,
				fmt.Sprintf("host %s is no longer served: no Ingress of class tuna has a rule for it any more; its tunnel is closed", host))
		}
		r.pruneHost(ing, host)
	}
	r.writeStatus(ctx, keys)
}

// pruneHost forgets what ing was told about host.
func (r *Reconciler) pruneHost(ing *networkingv1.Ingress, host string) {
	r.notes.Clear(ing, "connected/"+host)
	r.notes.Clear(ing, "failure/"+host)
	r.notes.Clear(ing, "routes/"+host)
	r.notes.Prune(ing, "backend/"+host+"/", nil)
	r.notes.Prune(ing, "conflict/"+host+"/", nil)
	r.notes.Prune(ing, "tls/"+host+"/", nil)
}

// event records an event about subject on ing (see ingress.Action).
func (r *Reconciler) event(ing *networkingv1.Ingress, typ, reason, verb, subject, msg string) {
	r.Recorder.Eventf(ing, nil, typ, reason, ingress.Action(verb, subject, msg), "%s", msg)
}

func (r *Reconciler) wake(host string) { r.wakes.Wake(types.NamespacedName{Name: host}) }

func keysOf(ings []*networkingv1.Ingress) []types.NamespacedName {
	out := make([]types.NamespacedName, 0, len(ings))
	for _, ing := range ings {
		out = append(out, client.ObjectKeyFromObject(ing))
	}
	return out
}
