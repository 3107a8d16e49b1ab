package harness

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

var envtestAdmin = envtest.User{Name: "tuna-admin", Groups: []string{"system:masters"}}

func createNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// ServicePort is one port of a test Service.
type ServicePort struct {
	Name string
	Port int32
}

// CreateService creates a ClusterIP Service (no selector: nothing runs pods
// here) and returns it with its allocated loopback ClusterIP.
func CreateService(ctx context.Context, c client.Client, namespace, name string, ports ...ServicePort) (*corev1.Service, error) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name: p.Name, Port: p.Port, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(p.Port),
		})
	}
	if err := c.Create(ctx, svc); err != nil {
		return nil, fmt.Errorf("creating Service %s/%s: %w", namespace, name, err)
	}
	return svc, nil
}
