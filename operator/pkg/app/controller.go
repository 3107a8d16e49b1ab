package app

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	edgeclient "code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/apikey"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/accesspolicy"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/domain"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/hostkey"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/loadbalancer"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/orphans"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/secretsync"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/sessions"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/tcpendpoint"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/tunnelkey"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/ingress"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/lbclass"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/metrics"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
)

// ControllerOptions configure the controller component.
type ControllerOptions struct {
	Common
	// EdgeAPIURL is the edge's control API, e.g. https://edge.example:8443.
	EdgeAPIURL string
	// EdgeAPIFingerprint pins the API's certificate ("sha256:HEX", from
	// `tuna-edge api-fingerprint`); EdgeAPICAFile is a PEM bundle to verify
	// it with instead (or as well). With neither, the system roots verify it.
	EdgeAPIFingerprint string
	EdgeAPICAFile      string
	// APIKey is the operator's key (tunnels:write); it can never start a
	// tunnel. It is fixed for the process's life (TUNA_API_KEY).
	APIKey string
	// APIKeyFile, when set instead, is a file holding the key (a mounted
	// Secret): it is re-read when it changes, so the key rotates with no
	// restart. APIKeyReload bounds how late a change is noticed when no
	// file event arrives (default apikey.DefaultInterval).
	APIKeyFile   string
	APIKeyReload time.Duration
	// ClusterID labels the keys this cluster issues; empty: the UID of the
	// kube-system namespace.
	ClusterID      string
	LeaderElection bool
	// Election tunes the leader election (zero fields: DefaultLeaderElection).
	Election LeaderElection
	// DNSVerifyInterval re-runs a failed DNS check of a custom domain
	// (default 5 minutes, as the seeds promise).
	DNSVerifyInterval time.Duration
	// ReservationResync re-reads reservations and tunnel keys to notice
	// deletions on the edge (default 1 minute for reservations, 2 for keys).
	ReservationResync time.Duration
	// SessionCheck is how often the Tunnels' agent entries are compared
	// with the sessions a single edge lists (default sessions.DefaultInterval).
	SessionCheck time.Duration
	// SecretSync configures the SecretSync controller.
	SecretSync SecretSyncOptions
	// LoadBalancer configures the LoadBalancer Service controller.
	LoadBalancer LoadBalancerOptions
}

// LoadBalancerOptions configure the LoadBalancer Service controller.
type LoadBalancerOptions struct {
	// Disabled leaves LoadBalancer Services alone (the chart then grants no
	// access to Services).
	Disabled bool
	// Classless also publishes LoadBalancer Services without a
	// loadBalancerClass, for clusters where tuna is the only load balancer.
	Classless bool
}

// SecretSyncOptions configure the SecretSync controller.
type SecretSyncOptions struct {
	// Disabled leaves SecretSyncs alone (the chart then grants no write
	// access to Secrets outside the operator's namespace).
	Disabled bool
	// Policy says what the operator's own key may be used for; nil:
	// secretsync.DefaultPolicy.
	Policy *secretsync.Policy
	// Wait is how long one long poll of the edge may last (default 50s).
	Wait time.Duration
}

// ControllerLeaderID names the controller's leader Lease, in the
// operator's namespace; the agent reads it to know the controller runs.
const ControllerLeaderID = "tuna-controller.k8s.tuna.am"

// RunController runs the controller until ctx ends.
func RunController(ctx context.Context, cfg *rest.Config, o ControllerOptions) error {
	if o.EdgeAPIURL == "" {
		return fmt.Errorf("the edge API URL is not set: pass --edge-api-url")
	}
	key, err := apiKeySource(o)
	if err != nil {
		return err
	}
	transport, err := edgeTransport(o)
	if err != nil {
		return err
	}
	var filters []func(*cache.Options)
	if !o.LoadBalancer.Disabled {
		filters = append(filters, loadbalancer.CacheFilter)
	}
	mgr, err := newElectedManager(cfg, o.Common, o.LeaderElection, o.Election, ControllerLeaderID, filters...)
	if err != nil {
		return err
	}
	if o.ClusterID == "" {
		if o.ClusterID, err = clusterID(ctx, mgr.GetAPIReader()); err != nil {
			return err
		}
	}
	if err := mgr.Add(key); err != nil {
		return fmt.Errorf("adding the API key watch: %w", err)
	}
	// Every edge call of the process goes through one pacer, which keeps
	// each API key's calls within the budget the edge advertises and
	// holds them all after a Retry-After, whichever controller makes them.
	pacer := edgeapi.NewPacer()
	pacer.Waited = func(d time.Duration) { metrics.EdgeAPIWait.Add(d.Seconds()) }
	edgeHTTP := &http.Client{Timeout: 30 * time.Second,
		Transport: pacer.Transport(edgeapi.InstrumentedTransport(transport, observeEdgeCall))}
	// The one client every reconciler and the orphan collector share: it
	// asks the source for the key on each call, so a rotation reaches all
	// of them at once.
	api := edgeclient.New(o.EdgeAPIURL, key.Key(), edgeclient.WithKeySource(key.Key), edgeclient.WithHTTPClient(edgeHTTP))
	// The tunnel keys as every controller reads them: one view of this
	// cluster's keys, read in pages by one lister, and keys issued and
	// renewed in batches.
	view := edgeapi.NewKeyView(api, map[string]string{edgeapi.LabelCluster: o.ClusterID})
	view.Log = ctrl.Log.WithName("tunnel-keys")
	// Read as often as the Tunnels look at their keys: a key revoked by
	// hand on the edge is noticed as soon as before the view.
	view.Interval = tunnelkey.Resync(o.ReservationResync)
	if err := mgr.Add(view); err != nil {
		return fmt.Errorf("adding the view of the tunnel keys: %w", err)
	}
	keysAPI := &edgeapi.SharedKeys{API: api, View: view, Batch: edgeapi.NewBatcher(api)}
	// Ready while the edge API answers the operator's key (every replica
	// asks, the standby too), so an unreachable edge or a refused key
	// shows as an unready controller, and an install waits for it.
	if err := mgr.AddReadyzCheck("edge-api", newEdgeCheck(func(ctx context.Context) error {
		_, err := api.WhoAmI(ctx)
		return err
	}).Check); err != nil {
		return err
	}
	metrics.ObserveReservations(mgr.GetClient())
	metrics.ObserveTunnelKeys(mgr.GetClient())
	info := &edgeapi.InfoCache{API: api}
	rec := mgr.GetEventRecorder("tuna-controller")
	ingressKeys := &hostkey.Reconciler{Client: mgr.GetClient(), Edge: ingressEdge{keysAPI, api}, Info: info, Namespace: o.Namespace,
		ClusterID: o.ClusterID, Recorder: rec, Resync: o.ReservationResync,
		Hooks: hostkey.Hooks{Issued: metrics.KeysIssued.Inc, Revoked: metrics.KeysRevoked.Inc}}
	apiReader := mgr.GetAPIReader()
	gc := &orphans.Collector{Reader: apiReader, Cached: mgr.GetClient(), Writer: mgr.GetClient(), Edge: keysAPI, ClusterID: o.ClusterID,
		Namespace: o.Namespace, Revoked: metrics.KeysRevoked.Inc,
		Watches: func(ns string) bool { return watches(o.WatchNamespaces, ns) },
		IngressHosts: func(ctx context.Context) (map[string]bool, error) {
			sources := []pubhost.HostLister{ingress.Source}
			if ingressKeys.ServesGateways() {
				sources = append(sources, gateway.Source)
			}
			return pubhost.ServedHosts(ctx, apiReader, o.WatchNamespaces, sources...)
		}}
	keys := &tunnelkey.Reconciler{Info: info, Resync: o.ReservationResync,
		Client: mgr.GetClient(), Edge: keysAPI, Namespace: o.Namespace, ClusterID: o.ClusterID,
		AllowExternalUpstreams: o.AllowExternalUpstreams, Sweep: gc.CollectTunnel,
		Workers: max(o.Concurrency, tunnelkey.DefaultWorkers),
		Hooks:   tunnelkey.Hooks{Issued: metrics.KeysIssued.Inc, Revoked: metrics.KeysRevoked.Inc},
	}
	if err := keys.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the tunnel key controller: %w", err)
	}
	domains := &domain.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Edge: api, Info: info, Recorder: rec,
		ClusterID: o.ClusterID, VerifyInterval: o.DNSVerifyInterval, Resync: o.ReservationResync}
	if err := domains.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the Domain controller: %w", err)
	}
	endpoints := &tcpendpoint.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Edge: api, Recorder: rec,
		ClusterID: o.ClusterID, Resync: o.ReservationResync}
	if err := endpoints.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the TCPEndpoint controller: %w", err)
	}
	policies := &accesspolicy.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Edge: api, Recorder: rec,
		ClusterID: o.ClusterID, Namespace: o.Namespace, Services: !o.LoadBalancer.Disabled}
	if err := policies.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the AccessPolicy controller: %w", err)
	}
	if err := ingressKeys.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the Ingress key controller: %w", err)
	}
	if err := watchControllerAPIs(mgr, o.Common, ingressKeys, policies, api); err != nil {
		return err
	}
	if !o.LoadBalancer.Disabled {
		lb := &loadbalancer.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: rec, Info: info,
			Classless: o.LoadBalancer.Classless}
		if err := lb.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the LoadBalancer Service controller: %w", err)
		}
		metrics.ObserveLoadBalancers(mgr.GetClient(), lbclass.Published)
	}
	if o.SecretSync.Disabled {
		off := &secretsync.Disabled{Client: mgr.GetClient(), Recorder: rec}
		if err := off.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the SecretSync controller: %w", err)
		}
	} else {
		policy := secretsync.DefaultPolicy
		if o.SecretSync.Policy != nil {
			policy = *o.SecretSync.Policy
		}
		hub := secretsync.NewHub(ctx)
		hub.Wait = o.SecretSync.Wait
		syncs := &secretsync.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Edge: api,
			NewAPI: func(key string) secretsync.SecretsAPI {
				return edgeclient.New(o.EdgeAPIURL, key, edgeclient.WithHTTPClient(edgeHTTP))
			},
			Policy: policy, Hub: hub, Recorder: rec}
		if err := syncs.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the SecretSync controller: %w", err)
		}
	}
	if err := mgr.Add(gc); err != nil {
		return fmt.Errorf("adding the orphan key collector: %w", err)
	}
	pruner := &sessions.Pruner{Client: mgr.GetClient(), Edge: api, ClusterID: o.ClusterID, Interval: o.SessionCheck,
		Log: ctrl.Log.WithName("sessions")}
	if err := mgr.Add(pruner); err != nil {
		return fmt.Errorf("adding the session check: %w", err)
	}
	return mgr.Start(ctx)
}

// ingressEdge is what the Ingress key controller calls: the shared keys,
// and the API for domains.
type ingressEdge struct {
	*edgeapi.SharedKeys
	api *edgeclient.Client
}

func (e ingressEdge) GetDomain(ctx context.Context, name string) (*apiwire.Domain, error) {
	return e.api.GetDomain(ctx, name)
}

// apiKeySource is the operator's key: from the file, watched, or from the
// environment, fixed.
func apiKeySource(o ControllerOptions) (*apikey.Source, error) {
	switch {
	case o.APIKeyFile != "" && o.APIKey != "":
		return nil, fmt.Errorf("the operator's API key is set twice, by --api-key-file and TUNA_API_KEY: keep one (chart: one of credentials.apiKey, credentials.existingSecret or extraEnv)")
	case o.APIKeyFile != "":
		s, err := apikey.FromFile(o.APIKeyFile, ctrl.Log.WithName("api-key"))
		if err != nil {
			return nil, err
		}
		s.Interval = o.APIKeyReload
		return s, nil
	case o.APIKey != "":
		// An environment variable cannot change under a running process:
		// rotating it takes a restart (docs/operations.md).
		return apikey.Static(o.APIKey), nil
	}
	return nil, fmt.Errorf("the operator's API key is not set: pass --api-key-file or set TUNA_API_KEY (chart: credentials.apiKey, credentials.existingSecret or extraEnv)")
}

func observeEdgeCall(op, result string, took time.Duration) {
	metrics.EdgeAPICalls.WithLabelValues(op, result).Inc()
	metrics.EdgeAPIDuration.WithLabelValues(op).Observe(took.Seconds())
}

// edgeTransport verifies the edge API's certificate as the options say, and
// fails at start on a malformed pin or bundle rather than on every call.
func edgeTransport(o ControllerOptions) (*http.Transport, error) {
	trust := edgeclient.Trust{Fingerprint: o.EdgeAPIFingerprint}
	if o.EdgeAPICAFile != "" {
		pem, err := os.ReadFile(o.EdgeAPICAFile)
		if err != nil {
			return nil, fmt.Errorf("reading the edge API CA bundle (--edge-api-ca-file): %w", err)
		}
		trust.CABundle = pem
	}
	u, err := url.Parse(o.EdgeAPIURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("the edge API URL %q is not an http(s) URL: pass --edge-api-url https://host:port", o.EdgeAPIURL)
	}
	switch {
	case u.Scheme == "http" && !trust.IsZero():
		return nil, fmt.Errorf("the edge API URL %s is plain http://, but a certificate pin or CA bundle is set: use https://", o.EdgeAPIURL)
	case u.Scheme == "http":
		ctrl.Log.WithName("controller").Info("WARNING: the edge API URL is plain http://: the API key travels in clear; use https:// and pin the edge's certificate (--edge-api-fingerprint)", "url", o.EdgeAPIURL)
	}
	tr, err := trust.Transport()
	if err != nil {
		return nil, fmt.Errorf("edge API TLS (--edge-api-fingerprint, --edge-api-ca-file): %w", err)
	}
	return tr, nil
}
