package reservation

import (
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
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

func TestForeignAndSharing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		have  apiwire.Sharing
		owner string
		want  bool // refused
	}{
		{"unowned", apiwire.Sharing{}, "c/a", false},
		{"own", apiwire.Sharing{Owner: "c/a"}, "c/a", false},
		{"another namespace", apiwire.Sharing{Owner: "c/b"}, "c/a", true},
		{"shared is still not adoptable", apiwire.Sharing{Owner: "c/b", SharedWith: []string{"c/a"}}, "c/a", true},
	} {
		err := Foreign("x.example", tc.have, tc.owner)
		if owner, ok := apiwire.OwnerOf(err); ok != tc.want || (ok && owner != tc.have.Owner) {
			t.Errorf("%s: Foreign = %v", tc.name, err)
		}
	}
	if SharingChanged([]string{"b", "a"}, []string{"a", "b", "a"}) {
		t.Error("the same set reads as changed")
	}
	if !SharingChanged(nil, []string{"a"}) || !SharingChanged([]string{"a"}, nil) {
		t.Error("a changed set reads as unchanged")
	}
}
