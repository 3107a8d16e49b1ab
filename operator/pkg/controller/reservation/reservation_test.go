package reservation

import (
	"testing"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

func TestRelease(t *testing.T) {
	for _, tc := range []struct {
		adopted bool
		policy  tunav1.ReclaimPolicy
		want    bool
	}{
		{false, "", true}, // Delete is the default
		{false, tunav1.ReclaimDelete, true},
		{false, tunav1.ReclaimRetain, false},
		{true, tunav1.ReclaimDelete, false}, // adopted: never
		{true, tunav1.ReclaimRetain, false},
	} {
		if got := Release(tc.adopted, tc.policy); got != tc.want {
			t.Errorf("Release(adopted=%v, %q) = %v, want %v", tc.adopted, tc.policy, got, tc.want)
		}
	}
}
