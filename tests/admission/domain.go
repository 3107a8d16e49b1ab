package admission

import "strings"

// Domain lists the Domain's admission rules. Whether the name is free on
// the account, and whether spec.domain lies under the edge's base domain
// (then a single-label subdomain is needed), are decided by the edge and
// show in status.
//
// Update cases create their old object for real in tests/e2e, so their
// names are ones no other test reserves on the shared edge.
var Domain = []Case{
	{Name: "subdomain", Spec: "{subdomain: my-app}"},
	{Name: "custom domain", Spec: "{domain: a.b.example.com}"},
	{Name: "labels of 63 characters", Spec: "{domain: " + strings.Repeat("a", 63) + ".example.com}"},
	{Name: "retain", Spec: "{subdomain: my-app, reclaimPolicy: Retain}"},
	{Name: "reclaim policy change", Old: "{subdomain: admission-a}", Spec: "{subdomain: admission-a, reclaimPolicy: Retain}"},
	{Name: "shared with namespaces", Spec: "{subdomain: a, sharedWith: [shop-dev, team2]}"},

	{Name: "no spec", Spec: "-", Field: "spec", Message: "Required value"},
	{Name: "neither subdomain nor domain", Spec: "{}", Field: "spec.subdomain", Message: "set one of subdomain"},
	{Name: "both subdomain and domain", Spec: "{subdomain: a, domain: a.example.com}", Field: "spec.domain", Message: "set only one of subdomain or domain"},
	{Name: "subdomain upper case", Spec: "{subdomain: My-App}", Field: "spec.subdomain", Message: "subdomain must be a DNS label"},
	{Name: "subdomain with a dot", Spec: "{subdomain: my.app}", Field: "spec.subdomain", Message: "subdomain must be a DNS label"},
	{Name: "subdomain too long", Spec: "{subdomain: " + strings.Repeat("a", 64) + "}", Field: "spec.subdomain", Message: "Too long"},
	{Name: "domain upper case", Spec: "{domain: API.example.com}", Field: "spec.domain", Message: "domain must be a lowercase fully qualified domain name"},
	{Name: "domain of one label", Spec: "{domain: localhost}", Field: "spec.domain", Message: "domain must be a lowercase fully qualified domain name"},
	{Name: "domain with trailing dot", Spec: "{domain: api.example.com.}", Field: "spec.domain", Message: "domain must be a lowercase fully qualified domain name"},
	{Name: "wildcard domain", Spec: "{domain: '*.example.com'}", Field: "spec.domain", Message: "domain must be a lowercase fully qualified domain name"},
	{Name: "domain label of 64 characters", Spec: "{domain: " + strings.Repeat("a", 64) + ".example.com}", Field: "spec.domain", Message: "each label at most 63 characters"},
	{Name: "domain too long", Spec: "{domain: " + strings.Repeat("a.", 127) + "com}", Field: "spec.domain", Message: "Too long"},
	{Name: "shared with a bad name", Spec: "{subdomain: a, sharedWith: [Shop_Dev]}", Field: "spec.sharedWith[0]", Message: "should match"},
	{Name: "shared with too many", Spec: "{subdomain: a, sharedWith: [" + manyNamespaces(33) + "]}", Field: "spec.sharedWith", Message: "Too many"},
	{Name: "unknown reclaim policy", Spec: "{subdomain: a, reclaimPolicy: Keep}", Field: "spec.reclaimPolicy", Message: "Unsupported value"},
	{Name: "subdomain changed", Old: "{subdomain: admission-a}", Spec: "{subdomain: admission-b}", Field: "spec.subdomain", Message: "subdomain is immutable: create a new Domain"},
	{Name: "domain changed", Old: "{domain: admission-a.example.com}", Spec: "{domain: admission-b.example.com}", Field: "spec.domain", Message: "domain is immutable: create a new Domain"},
	{Name: "switch from domain to subdomain", Old: "{domain: admission-a.example.com}", Spec: "{subdomain: admission-a}", Field: "spec.subdomain", Message: "switching a Domain between subdomain and domain is not allowed: create a new Domain"},
	{Name: "switch from subdomain to domain", Old: "{subdomain: admission-a}", Spec: "{domain: admission-a.example.com}", Field: "spec.subdomain", Message: "switching a Domain between subdomain and domain is not allowed: create a new Domain"},
}
