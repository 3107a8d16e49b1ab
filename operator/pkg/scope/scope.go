// Package scope lists objects within the namespaces a component is limited
// to (--watch-namespaces): a component limited to some namespaces may not
// list cluster-wide, so it lists namespace by namespace.
package scope

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// List fills list with the objects of its kind in namespaces (none: every
// namespace, in one list), in namespace order.
func List(ctx context.Context, reader client.Reader, list client.ObjectList, namespaces []string) error {
	if len(namespaces) == 0 {
		if err := reader.List(ctx, list); err != nil {
			return fmt.Errorf("listing %T: %w", list, err)
		}
		return nil
	}
	var all []runtime.Object
	for _, ns := range namespaces {
		one := list.DeepCopyObject().(client.ObjectList)
		if err := reader.List(ctx, one, client.InNamespace(ns)); err != nil {
			return fmt.Errorf("listing %T in namespace %s: %w", list, ns, err)
		}
		items, err := meta.ExtractList(one)
		if err != nil {
			return err
		}
		all = append(all, items...)
	}
	return meta.SetList(list, all)
}
