// Package cluster is tuna-operator's access to a Kubernetes cluster: the
// connection (kubeconfig), the CRDs (server-side apply as Helm's field
// manager), the plan (server-side dry-run diff), the ordered deletion of
// the operator's resources, and their status.
package cluster

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// FieldManager is the field manager of every server-side apply: Helm's,
// so that `helm upgrade` and tuna-operator own the same fields (R27).
const FieldManager = "helm"

// Flags select the cluster: --kubeconfig and --context (KUBECONFIG and the
// current context by default).
type Flags struct {
	Kubeconfig string
	Context    string
}

// AddFlags registers --kubeconfig and --context.
func (f *Flags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "path of the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&f.Context, "kube-context", "", "the kubeconfig context to use (default: the current context)")
}

// Cluster is a connection to one cluster.
type Cluster struct {
	Config    *rest.Config
	Kube      kubernetes.Interface
	Dynamic   dynamic.Interface
	APIExt    apiextclient.Interface
	Discovery discovery.CachedDiscoveryInterface
	Mapper    meta.ResettableRESTMapper
	loader    clientcmd.ClientConfig
	// Where describes the cluster for messages: the API server's URL.
	Where string
}

// ConnectError is a failure to build a client or to reach the API server.
type ConnectError struct{ Err error }

func (e *ConnectError) Error() string { return e.Err.Error() }
func (e *ConnectError) Unwrap() error { return e.Err }

// Connect loads the kubeconfig and builds the clients. It does not call the
// API server; Ping does.
func (f Flags) Connect() (*Cluster, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f.Kubeconfig != "" {
		rules.ExplicitPath = f.Kubeconfig
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.Context})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, &ConnectError{fmt.Errorf("loading the kubeconfig: %w (set --kubeconfig or KUBECONFIG, and --kube-context)", err)}
	}
	return newCluster(cfg, loader)
}

func newCluster(cfg *rest.Config, loader clientcmd.ClientConfig) (*Cluster, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	c := &Cluster{Config: cfg, loader: loader, Where: cfg.Host}
	var err error
	if c.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, &ConnectError{err}
	}
	if c.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, &ConnectError{err}
	}
	if c.APIExt, err = apiextclient.NewForConfig(cfg); err != nil {
		return nil, &ConnectError{err}
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, &ConnectError{err}
	}
	c.Discovery = memory.NewMemCacheClient(dc)
	c.Mapper = restmapper.NewDeferredDiscoveryRESTMapper(c.Discovery)
	return c, nil
}

// Ping checks that the API server answers and returns its version.
func (c *Cluster) Ping(ctx context.Context) (*version.Version, error) {
	info, err := c.Kube.Discovery().ServerVersion()
	if err != nil {
		return nil, &ConnectError{fmt.Errorf("cannot reach the Kubernetes API server at %s: %w (check --kubeconfig, --kube-context and the network)", c.Where, err)}
	}
	v, err := version.ParseGeneric(info.GitVersion)
	if err != nil {
		return nil, fmt.Errorf("parsing the server version %q: %w", info.GitVersion, err)
	}
	return v, nil
}

// KubeVersion returns the server's version as the chart's kubeVersion
// check wants it, e.g. "v1.37.2".
func (c *Cluster) KubeVersion(ctx context.Context) (string, error) {
	v, err := c.Ping(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("v%d.%d.%d", v.Major(), v.Minor(), v.Patch()), nil
}

// Invalidate forgets discovery: call it after CRDs change.
func (c *Cluster) Invalidate() {
	c.Discovery.Invalidate()
	c.Mapper.Reset()
}

// Getter returns a RESTClientGetter for the Helm SDK that shares this
// connection (no discovery cache on disk).
func (c *Cluster) Getter(namespace string) genericclioptions.RESTClientGetter {
	return &getter{c: c, namespace: namespace}
}

type getter struct {
	c         *Cluster
	namespace string
}

func (g *getter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.c.Config), nil }
func (g *getter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return g.c.Discovery, nil
}
func (g *getter) ToRESTMapper() (meta.RESTMapper, error) { return g.c.Mapper, nil }
func (g *getter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return &namespacedLoader{base: g.c.loader, namespace: g.namespace, cfg: g.c.Config}
}

// namespacedLoader is the kubeconfig loader with the release namespace as
// the default namespace (Helm builds objects in it).
type namespacedLoader struct {
	base      clientcmd.ClientConfig
	namespace string
	cfg       *rest.Config
}

func (l *namespacedLoader) RawConfig() (clientcmdapi.Config, error) { return l.base.RawConfig() }
func (l *namespacedLoader) ConfigAccess() clientcmd.ConfigAccess    { return l.base.ConfigAccess() }

func (l *namespacedLoader) Namespace() (string, bool, error) { return l.namespace, true, nil }
func (l *namespacedLoader) ClientConfig() (*rest.Config, error) {
	return rest.CopyConfig(l.cfg), nil
}

// IsNotServed reports whether err says that a kind is not served by the
// cluster (e.g. its CRD is not installed).
func IsNotServed(err error) bool {
	return meta.IsNoMatchError(err) || (err != nil && strings.Contains(err.Error(), "the server could not find the requested resource"))
}
