package admission

import "strings"

// TCPEndpoint lists the TCPEndpoint's admission rules. Whether the alias is
// free on the account and a port is left in the edge's range are decided by
// the edge and show in status.
var TCPEndpoint = []Case{
	{Name: "alias", Spec: "{alias: postgres}"},
	{Name: "alias with digits", Spec: "{alias: pg-5432}"},
	{Name: "retain", Spec: "{alias: pg, reclaimPolicy: Retain}"},
	{Name: "shared with a namespace", Spec: "{alias: pg, sharedWith: [team2]}"},
	{Name: "reclaim policy change", Old: "{alias: admission-pg}", Spec: "{alias: admission-pg, reclaimPolicy: Retain}"},

	{Name: "no spec", Spec: "-", Field: "spec", Message: "Required value"},
	{Name: "no alias", Spec: "{}", Field: "spec.alias", Message: "Required value"},
	{Name: "alias upper case", Spec: "{alias: Postgres}", Field: "spec.alias", Message: "alias must be a DNS label"},
	{Name: "alias starts with '-'", Spec: "{alias: -pg}", Field: "spec.alias", Message: "alias must be a DNS label"},
	{Name: "alias only digits", Spec: "{alias: '5432'}", Field: "spec.alias", Message: "alias must not be only digits"},
	{Name: "alias too long", Spec: "{alias: " + strings.Repeat("a", 64) + "}", Field: "spec.alias", Message: "Too long"},
	{Name: "shared with too many", Spec: "{alias: pg, sharedWith: [" + manyNamespaces(33) + "]}", Field: "spec.sharedWith", Message: "Too many"},
	{Name: "shared with a long name", Spec: "{alias: pg, sharedWith: [" + strings.Repeat("a", 64) + "]}", Field: "spec.sharedWith[0]", Message: "Too long"},
	{Name: "unknown reclaim policy", Spec: "{alias: pg, reclaimPolicy: Keep}", Field: "spec.reclaimPolicy", Message: "Unsupported value"},
	{Name: "unknown field", Spec: "{alias: pg, port: 5432}", Field: "spec.port", Message: "unknown field"},
	{Name: "alias changed", Old: "{alias: admission-pg}", Spec: "{alias: admission-db}", Field: "spec.alias", Message: "alias is immutable: create a new TCPEndpoint"},
}
