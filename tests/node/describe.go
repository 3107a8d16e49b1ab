package node

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Describe is what an operator paged at night looks at first when a
// namespace's pods do not become ready: each pod's phase, conditions that
// are not True, each container's state, restarts and the last lines of
// its logs (and of the previous instance's after a restart), then the
// namespace's events in order. A test prints it when a wait fails, so
// that a failure on a machine whose files are gone (a CI runner) still
// says why.
func (c *Cluster) Describe(ctx context.Context, namespace string) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var b strings.Builder
	c.describeNodes(ctx, &b)
	pods, err := c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(&b, "listing the pods of %s: %v\n", namespace, err)
	} else {
		fmt.Fprintf(&b, "pods of %s: %d\n", namespace, len(pods.Items))
		for i := range pods.Items {
			c.describePod(ctx, &b, &pods.Items[i])
		}
	}
	events, err := c.Client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(&b, "listing the events of %s: %v\n", namespace, err)
		return b.String()
	}
	sort.SliceStable(events.Items, func(i, j int) bool {
		return eventTime(&events.Items[i]).Before(eventTime(&events.Items[j]))
	})
	fmt.Fprintf(&b, "events of %s: %d\n", namespace, len(events.Items))
	for _, e := range events.Items {
		fmt.Fprintf(&b, "  %s %s %s/%s %s: %s (x%d)\n", eventTime(&e).Format("15:04:05"), e.Type,
			e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, strings.TrimSpace(e.Message), max(e.Count, 1))
	}
	return b.String()
}

// describeNodes writes each node's taints and the conditions that say
// something is wrong (Ready not True, a pressure True): what a pod that
// cannot be scheduled waits on.
func (c *Cluster) describeNodes(ctx context.Context, b *strings.Builder) {
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(b, "listing the nodes: %v\n", err)
		return
	}
	for _, n := range nodes.Items {
		fmt.Fprintf(b, "node %s:", n.Name)
		for _, t := range n.Spec.Taints {
			fmt.Fprintf(b, " taint %s:%s", t.Key, t.Effect)
		}
		for _, cond := range n.Status.Conditions {
			if (cond.Type == corev1.NodeReady) != (cond.Status == corev1.ConditionTrue) {
				fmt.Fprintf(b, " %s=%s (%s)", cond.Type, cond.Status, cond.Message)
			}
		}
		fmt.Fprintln(b)
	}
}

func (c *Cluster) describePod(ctx context.Context, b *strings.Builder, p *corev1.Pod) {
	fmt.Fprintf(b, "- pod %s: %s on %q, IP %s\n", p.Name, p.Status.Phase, p.Spec.NodeName, p.Status.PodIP)
	for _, cond := range p.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			fmt.Fprintf(b, "    condition %s=%s %s %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	statuses := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, s := range statuses {
		fmt.Fprintf(b, "    container %s: ready=%t restarts=%d state=%s last=%s\n", s.Name, s.Ready, s.RestartCount,
			containerState(s.State), containerState(s.LastTerminationState))
		c.logTail(ctx, b, p, s.Name, false)
		if s.RestartCount > 0 {
			c.logTail(ctx, b, p, s.Name, true)
		}
	}
}

// logTail writes the last lines of a container's log, indented.
func (c *Cluster) logTail(ctx context.Context, b *strings.Builder, p *corev1.Pod, container string, previous bool) {
	opts := &corev1.PodLogOptions{Container: container, Previous: previous, TailLines: ptr.To[int64](40)}
	raw, err := c.Client.CoreV1().Pods(p.Namespace).GetLogs(p.Name, opts).DoRaw(ctx)
	which := "log"
	if previous {
		which = "previous instance's log"
	}
	if err != nil {
		fmt.Fprintf(b, "      (%s: %v)\n", which, err)
		return
	}
	fmt.Fprintf(b, "      %s, last lines:\n", which)
	for _, line := range strings.Split(strings.TrimRight(string(raw), "\n"), "\n") {
		fmt.Fprintf(b, "        %s\n", line)
	}
}

func containerState(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running since " + s.Running.StartedAt.Format("15:04:05")
	case s.Waiting != nil:
		return fmt.Sprintf("waiting (%s: %s)", s.Waiting.Reason, s.Waiting.Message)
	case s.Terminated != nil:
		return fmt.Sprintf("terminated (%s, exit %d: %s)", s.Terminated.Reason, s.Terminated.ExitCode, s.Terminated.Message)
	}
	return "none"
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
