package status

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

// AgentEntryOwner is the field manager of one agent replica's own entry in
// a Tunnel's status.agents: a manager per replica, so that server-side
// apply keeps each replica's entry apart and drops it when the replica
// applies it no more.
func AgentEntryOwner(replica string) string { return AgentFieldOwner + "/" + replica }

// RemoveAgentEntry removes replica's entry from the status.agents of the
// Tunnel key as the replica itself would: by applying no fields under its
// field manager. The agent replicas' heartbeat does it for a replica whose
// Lease lapsed, the controller for one whose session the edge no longer
// lists.
func RemoveAgentEntry(ctx context.Context, c client.Client, key client.ObjectKey, replica string) error {
	if err := Apply(ctx, c, tunav1.GroupVersion.WithKind("Tunnel"), key, AgentEntryOwner(replica), Fields{}); err != nil {
		return fmt.Errorf("removing the entry of agent replica %s from Tunnel %s: %w", replica, key, err)
	}
	return nil
}
