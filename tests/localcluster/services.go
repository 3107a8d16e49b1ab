package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// services answers on every Service's ClusterIP and TCP ports, as a pod
// behind the Service would: this cluster runs no pods, and its ClusterIPs
// are loopback addresses (harness.ServiceCIDR), so the agent dials them
// as it would in a cluster. Each answers plain HTTP/1.1 and cleartext
// HTTP/2 (h2c), naming the Service and port, with the request's Host and
// forwarded fields. Services of kube-system, of the operator's namespace
// (its metrics) and the API server's own are left alone.
type services struct {
	mu        sync.Mutex
	listeners map[string]*http.Server // by ip:port
	byService map[types.NamespacedName][]string
	stop      chan struct{}
}

func serveServices(ctx context.Context, cfg *rest.Config) (*services, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	s := &services{listeners: map[string]*http.Server{}, byService: map[types.NamespacedName][]string{}, stop: make(chan struct{})}
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Services().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { s.sync(o) },
		UpdateFunc: func(_, o any) { s.sync(o) },
		DeleteFunc: func(o any) {
			if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			if svc, ok := o.(*corev1.Service); ok {
				s.set(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, nil, nil)
			}
		},
	}); err != nil {
		return nil, err
	}
	factory.Start(s.stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		close(s.stop)
		return nil, errors.New("the Service informer did not sync")
	}
	return s, nil
}

func (s *services) sync(o any) {
	svc, ok := o.(*corev1.Service)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	ip := svc.Spec.ClusterIP
	if ip == "" || ip == corev1.ClusterIPNone || svc.Namespace == "kube-system" || svc.Namespace == harness.OperatorNamespace ||
		(svc.Namespace == "default" && svc.Name == "kubernetes") {
		s.set(key, nil, nil)
		return
	}
	var addrs []string
	for _, p := range svc.Spec.Ports {
		if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
			addrs = append(addrs, net.JoinHostPort(ip, strconv.Itoa(int(p.Port))))
		}
	}
	s.set(key, svc, addrs)
}

// set makes the listeners of a Service those of addrs.
func (s *services) set(key types.NamespacedName, svc *corev1.Service, addrs []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := map[string]bool{}
	for _, a := range addrs {
		want[a] = true
		if _, ok := s.listeners[a]; ok {
			continue
		}
		srv, err := listen(key, a)
		if err != nil {
			continue // another process holds the address: nothing to answer for
		}
		s.listeners[a] = srv
	}
	for _, a := range s.byService[key] {
		if !want[a] {
			_ = s.listeners[a].Close()
			delete(s.listeners, a)
		}
	}
	s.byService[key] = addrs
	if svc == nil {
		delete(s.byService, key)
	}
}

func listen(key types.NamespacedName, addr string) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "Hello from Service %s (port %s), published by tuna.\nHost: %s\nPath: %s\nX-Forwarded-For: %s\n",
			key, port, r.Host, r.URL.Path, r.Header.Get("X-Forwarded-For"))
	})}
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	go func() { _ = srv.Serve(ln) }()
	return srv, nil
}

func (s *services) close() error {
	close(s.stop)
	s.mu.Lock()
	defer s.mu.Unlock()
	for a, srv := range s.listeners {
		_ = srv.Close()
		delete(s.listeners, a)
	}
	return nil
}
