package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

func TestLeaseLive(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	spec := func(holder string, renewedAgo time.Duration, seconds int32) coordinationv1.LeaseSpec {
		at := metav1.NewMicroTime(now.Add(-renewedAgo))
		return coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), RenewTime: &at, LeaseDurationSeconds: ptr.To(seconds)}
	}
	tests := []struct {
		name string
		spec coordinationv1.LeaseSpec
		want bool
	}{
		{"renewed within its duration", spec("agent-a", 10*time.Second, 30), true},
		{"renewed just now", spec("agent-a", 0, 30), true},
		{"lapsed", spec("agent-a", 31*time.Second, 30), false},
		{"lapsed at the boundary", spec("agent-a", 30*time.Second, 30), false},
		{"held by another replica", spec("agent-b", 0, 30), false},
		{"no holder", coordinationv1.LeaseSpec{RenewTime: spec("agent-a", 0, 30).RenewTime, LeaseDurationSeconds: ptr.To(int32(30))}, false},
		{"never renewed", coordinationv1.LeaseSpec{HolderIdentity: ptr.To("agent-a"), LeaseDurationSeconds: ptr.To(int32(30))}, false},
		{"no duration", coordinationv1.LeaseSpec{HolderIdentity: ptr.To("agent-a"), RenewTime: spec("agent-a", 0, 30).RenewTime}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, leaseLive(tt.spec, "agent-a", now))
		})
	}
}

func TestLeaseName(t *testing.T) {
	tests := map[string]string{
		"tuna-k8s-operator-agent-5d9c7b-x2x9q": "tuna-agent-tuna-k8s-operator-agent-5d9c7b-x2x9q",
		"Agent_0":                              "tuna-agent-agent-0",
		"node.example.com":                     "tuna-agent-node.example.com",
		strings.Repeat("a", 300):               "tuna-agent-" + strings.Repeat("a", 253-len("tuna-agent-")),
		"trailing-":                            "tuna-agent-trailing",
	}
	for replica, want := range tests {
		got := LeaseName(replica)
		assert.Equal(t, want, got, "LeaseName(%q)", replica)
		assert.Empty(t, validation.IsDNS1123Subdomain(got), "LeaseName(%q) = %q is not a valid object name", replica, got)
	}
}
