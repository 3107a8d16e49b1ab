package accesspolicy

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

// secrets reads Secrets from a map: Build only ever gets Secrets by name,
// and what this test checks is the mapping of fields, not the reads.
type secrets map[string]*corev1.Secret

func (s secrets) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	sec, ok := s[key.Namespace+"/"+key.Name]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, key.Name)
	}
	sec.DeepCopyInto(obj.(*corev1.Secret))
	return nil
}

func (s secrets) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return fmt.Errorf("Build lists nothing")
}

// fullPolicy sets every field of the AccessPolicy spec: a rule of each
// kind, limits, header edits, pages.
func fullPolicy() *tunav1.AccessPolicy {
	no := false
	return &tunav1.AccessPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "staff"},
		Spec: tunav1.AccessPolicySpec{
			Rules: []tunav1.AccessRule{
				{Name: "health", PathPrefixes: []string{"/healthz"}, Methods: []string{"GET"}, Public: true},
				{Name: "admin", PathPrefixes: []string{"/admin"}, Deny: true},
				{Name: "office", IP: &tunav1.AccessIPRule{AllowCIDRs: []string{"192.0.2.0/24"}, DenyCIDRs: []string{"192.0.2.7/32"}}},
				{Name: "sso", OIDC: &tunav1.OIDCRule{IssuerURL: "https://id.example.com", ClientID: "web",
					ClientSecretRef: tunav1.SecretKeySelector{Name: "oidc", Key: "secret"}, Scopes: []string{"openid", "email"},
					GroupsClaim: "roles", AllowedEmails: []string{"a@example.com"}, AllowedDomains: []string{"example.com"},
					AllowedGroups: []string{"staff"}, AllowedClaims: []tunav1.ClaimRequirement{{Name: "team", Values: []string{"web"}}}}},
				{Name: "htpasswd", BasicAuth: &tunav1.BasicAuthRule{SecretRef: tunav1.SecretKeySelector{Name: "users", Key: "file"}, Realm: "staff"}},
				{Name: "shared", Links: &tunav1.LinksRule{SecretRef: tunav1.SecretKeySelector{Name: "links", Key: "signing-key"}}},
			},
			SessionLifetime: &metav1.Duration{Duration: 8 * time.Hour},
			RateLimits: &tunav1.AccessRateLimits{
				PerClientIP: &tunav1.RateLimit{Requests: 100, Period: metav1.Duration{Duration: time.Minute}},
				PerIdentity: &tunav1.RateLimit{Requests: 1000, Period: metav1.Duration{Duration: time.Hour}},
			},
			IdentityHeaders: &no,
			RequestHeaders:  &tunav1.HeaderEdits{Set: map[string]string{"X-Env": "prod"}, Remove: []string{"X-Debug"}},
			ResponseHeaders: &tunav1.HeaderEdits{Set: map[string]string{"Cache-Control": "no-store"}, Remove: []string{"Server"}},
			DenyPage:        "<p>no</p>",
			MaintenancePage: "<p>later</p>",
			Maintenance:     true,
		},
	}
}

// fullSecrets hold the Secrets fullPolicy names, at the keys it names.
func fullSecrets() secrets {
	return secrets{
		"app/oidc":  {Data: map[string][]byte{"secret": []byte("s3cret")}},
		"app/users": {Data: map[string][]byte{"file": []byte("alice:$2y$05$abc")}},
		"app/links": {Data: map[string][]byte{"signing-key": []byte("link-key")}},
	}
}

// The AccessPolicy CRD and the edge's policy (edge/apiwire) say the same
// things: a spec with every field set becomes the edge's policy with
// every field set, value for value. A field added on one side and not
// carried by Build fails here.
func TestBuildCarriesEveryField(t *testing.T) {
	p := fullPolicy()
	assert.Empty(t, zeroLeaves(reflect.ValueOf(p.Spec), "spec"), "fullPolicy leaves fields of the AccessPolicy spec unset: set them, and carry them in Build")

	read := fullSecrets()
	got, err := Build(context.Background(), read, p, "cluster/app")
	require.NoError(t, err)

	want := apiwire.AccessPolicy{
		Name: "staff", Owner: "cluster/app",
		Rules: []apiwire.AccessRule{
			{Name: "health", PathPrefixes: []string{"/healthz"}, Methods: []string{"GET"}, Public: true},
			{Name: "admin", PathPrefixes: []string{"/admin"}, Deny: true},
			{Name: "office", IP: &apiwire.IPRule{AllowCIDRs: []string{"192.0.2.0/24"}, DenyCIDRs: []string{"192.0.2.7/32"}}},
			{Name: "sso", OIDC: &apiwire.OIDCRule{IssuerURL: "https://id.example.com", ClientID: "web", ClientSecret: "s3cret",
				Scopes: []string{"openid", "email"}, GroupsClaim: "roles", AllowedEmails: []string{"a@example.com"},
				AllowedDomains: []string{"example.com"}, AllowedGroups: []string{"staff"},
				AllowedClaims: []apiwire.ClaimMatch{{Name: "team", Values: []string{"web"}}}}},
			{Name: "htpasswd", BasicAuth: &apiwire.BasicAuthRule{Htpasswd: "alice:$2y$05$abc", Realm: "staff"}},
			{Name: "shared", Links: &apiwire.LinksRule{Key: "link-key"}},
		},
		SessionLifetimeSeconds: 8 * 3600,
		RateLimits: &apiwire.AccessRateLimits{
			PerClientIP: &apiwire.RequestRate{Requests: 100, PeriodSeconds: 60},
			PerIdentity: &apiwire.RequestRate{Requests: 1000, PeriodSeconds: 3600},
		},
		NoIdentityHeaders: true,
		RequestHeaders:    &apiwire.HeaderEdits{Set: map[string]string{"X-Env": "prod"}, Remove: []string{"X-Debug"}},
		ResponseHeaders:   &apiwire.HeaderEdits{Set: map[string]string{"Cache-Control": "no-store"}, Remove: []string{"Server"}},
		DenyPage:          "<p>no</p>",
		MaintenancePage:   "<p>later</p>",
		Maintenance:       true,
	}
	assert.Equal(t, want, got)
	// What the edge fills in itself (output only) stays unset.
	assert.Equal(t, []string{"policy.Digest", "policy.UpdatedAt"}, zeroLeaves(reflect.ValueOf(got), "policy"),
		"Build leaves fields of the edge's policy unset: the CRD has no field for them (add one), or they are the edge's output")
}

// Each field of the spec changes the edge's policy: Build reads none of
// them for nothing, and drops none.
func TestBuildReadsEveryField(t *testing.T) {
	read := fullSecrets()
	full, err := Build(context.Background(), read, fullPolicy(), "cluster/app")
	require.NoError(t, err)
	paths := leafPaths(reflect.ValueOf(fullPolicy().Spec), "spec")
	require.NotEmpty(t, paths)
	for _, path := range paths {
		p := fullPolicy()
		zeroAt(reflect.ValueOf(&p.Spec).Elem(), strings.TrimPrefix(path, "spec."))
		got, err := Build(context.Background(), read, p, "cluster/app")
		if err != nil {
			// A Secret reference left out is refused (or names the
			// default key, which the Secret lacks): Build read it.
			assert.Contains(t, path, "SecretRef", "without the spec's %s Build fails: %v", path, err)
			continue
		}
		assert.False(t, reflect.DeepEqual(full, got), "the spec's %s set or not makes no difference to the edge's policy: Build drops it", path)
	}
}

// leafPaths are the paths of the leaves (strings, numbers, bools, maps,
// slices of scalars) set under v, slices of structs walked at each index.
func leafPaths(v reflect.Value, path string) []string {
	if v.IsZero() {
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.Elem().Kind() != reflect.Struct {
			return []string{path} // a set *bool is a value, false included
		}
		return leafPaths(v.Elem(), path)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(metav1.Duration{}) || v.Type() == reflect.TypeOf(time.Time{}) {
			return []string{path}
		}
		var out []string
		for i := range v.NumField() {
			out = append(out, leafPaths(v.Field(i), path+"."+v.Type().Field(i).Name)...)
		}
		return out
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Struct {
			var out []string
			for i := range v.Len() {
				out = append(out, leafPaths(v.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
			}
			return out
		}
	}
	return []string{path}
}

// zeroLeaves are the leaves under v that are zero in every element of
// the slices they are in (paths without indexes), sorted.
func zeroLeaves(v reflect.Value, path string) []string {
	set := map[string]bool{}
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				// A nil struct pointer: every leaf of its type is unset.
				for _, p := range typeLeaves(v.Type().Elem(), path) {
					if _, seen := set[p]; !seen {
						set[p] = false
					}
				}
				return
			}
			if v.Elem().Kind() != reflect.Struct {
				set[path] = true // a set *bool is a value, false included
				return
			}
			walk(v.Elem(), path)
			return
		case reflect.Struct:
			if v.Type() != reflect.TypeOf(metav1.Duration{}) && v.Type() != reflect.TypeOf(time.Time{}) {
				for i := range v.NumField() {
					walk(v.Field(i), path+"."+v.Type().Field(i).Name)
				}
				return
			}
		case reflect.Slice:
			if v.Type().Elem().Kind() == reflect.Struct {
				for _, p := range typeLeaves(v.Type().Elem(), path) {
					if _, seen := set[p]; !seen {
						set[p] = false
					}
				}
				for i := range v.Len() {
					walk(v.Index(i), path)
				}
				return
			}
		}
		set[path] = set[path] || !v.IsZero()
	}
	walk(v, path)
	var out []string
	for p, ok := range set {
		if !ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// typeLeaves are the leaf paths of type t (pointers and slices of
// structs looked through).
func typeLeaves(t reflect.Type, path string) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8 && (t.Elem().Kind() == reflect.Struct || t.Elem().Kind() == reflect.Pointer) {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == reflect.TypeOf(metav1.Duration{}) || t == reflect.TypeOf(time.Time{}) {
		return []string{path}
	}
	var out []string
	for i := range t.NumField() {
		out = append(out, typeLeaves(t.Field(i).Type, path+"."+t.Field(i).Name)...)
	}
	return out
}

// zeroAt sets the leaf at path (as leafPaths writes it, below v) to its
// zero value.
func zeroAt(v reflect.Value, path string) {
	for _, part := range strings.Split(path, ".") {
		name, idx, indexed := strings.Cut(part, "[")
		for v.Kind() == reflect.Pointer {
			v = v.Elem()
		}
		v = v.FieldByName(name)
		if indexed {
			var i int
			_, _ = fmt.Sscanf(idx, "%d]", &i)
			v = v.Index(i)
		}
	}
	v.Set(reflect.Zero(v.Type()))
}
