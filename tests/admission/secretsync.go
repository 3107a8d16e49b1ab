package admission

import "strings"

// SecretSync lists the SecretSync's admission rules. Whether the edge
// secret exists, and whether the key or the operator's policy may read it,
// are decided by the edge and the operator and show in status.
var SecretSync = []Case{
	{Name: "one secret", Spec: "{source: {name: team-a/db}}"},
	{Name: "a prefix", Spec: "{source: {prefix: team-a/}}"},
	{Name: "everything set", Spec: `{source: {name: team-a/db}, target: {name: db-credentials, keys: [{from: password, to: DB_PASSWORD}, {from: user}],
  template: {DSN: "postgres://{{ .user }}:{{ .password }}@db/app"}, adoptExisting: true}, refreshInterval: 30s, deletionPolicy: Retain,
  apiKeySecretRef: {name: team-a-key}}`},
	{Name: "refresh interval bounds", Spec: "{source: {name: a}, refreshInterval: 24h}"},
	{Name: "deletion policy change", Old: "{source: {name: a}}", Spec: "{source: {name: a}, deletionPolicy: Retain}"},
	{Name: "source change", Old: "{source: {name: a}}", Spec: "{source: {prefix: a/}}"},

	{Name: "no spec", Spec: "-", Field: "spec", Message: "Required value"},
	{Name: "no source", Spec: "{}", Field: "spec.source", Message: "Required value"},
	{Name: "empty source", Spec: "{source: {}}", Field: "spec.source.name", Message: "set exactly one of source.name"},
	{Name: "name and prefix", Spec: "{source: {name: a, prefix: a/}}", Field: "spec.source.name", Message: "set exactly one of source.name"},
	{Name: "name upper case", Spec: "{source: {name: Team/DB}}", Field: "spec.source.name", Message: "source.name must be an edge secret name"},
	{Name: "name ends with '/'", Spec: "{source: {name: team-a/}}", Field: "spec.source.name", Message: "source.name must be an edge secret name"},
	{Name: "name with '..'", Spec: "{source: {name: a/../b}}", Field: "spec.source.name", Message: "source.name must be an edge secret name"},
	{Name: "name with '//'", Spec: "{source: {name: a//b}}", Field: "spec.source.name", Message: "source.name must be an edge secret name"},
	{Name: "name too long", Spec: "{source: {name: " + strings.Repeat("a", 254) + "}}", Field: "spec.source.name", Message: "Too long"},
	{Name: "prefix with a space", Spec: "{source: {prefix: 'team a'}}", Field: "spec.source.prefix", Message: "source.prefix must start an edge secret name"},
	{Name: "target name not a Secret name", Spec: "{source: {name: a}, target: {name: DB_Creds}}", Field: "spec.target.name", Message: "target.name must be the name of a Secret"},
	{Name: "target name changed", Old: "{source: {name: a}, target: {name: one}}", Spec: "{source: {name: a}, target: {name: two}}",
		Field: "spec.target.name", Message: "target.name is immutable"},
	{Name: "mapped key not a Secret key", Spec: "{source: {name: a}, target: {keys: [{from: 'pass word'}]}}", Field: "spec.target.keys[0].from", Message: "should match"},
	{Name: "two mappings to one key", Spec: "{source: {name: a}, target: {keys: [{from: a, to: x}, {from: b, to: x}]}}",
		Field: "spec.target.keys", Message: "two entries of target.keys write the same target key"},
	{Name: "mapping and template write one key", Spec: "{source: {name: a}, target: {keys: [{from: a, to: DSN}], template: {DSN: x}}}",
		Field: "spec.target.template", Message: "a target key of target.keys is also a key of target.template"},
	{Name: "adopt without naming the Secret", Spec: "{source: {name: a}, target: {adoptExisting: true}}",
		Field: "spec.target.adoptExisting", Message: "target.adoptExisting takes over a Secret only when target.name names it"},
	{Name: "template key not a Secret key", Spec: "{source: {name: a}, target: {template: {'a b': x}}}", Field: "spec.target.template", Message: "target.template keys must be Secret keys"},
	{Name: "refresh too short", Spec: "{source: {name: a}, refreshInterval: 5s}", Field: "spec.refreshInterval", Message: "refreshInterval must be between 10s and 24h"},
	{Name: "refresh too long", Spec: "{source: {name: a}, refreshInterval: 25h}", Field: "spec.refreshInterval", Message: "refreshInterval must be between 10s and 24h"},
	{Name: "refresh not a duration", Spec: "{source: {name: a}, refreshInterval: often}", Field: "spec.refreshInterval", Message: "duration"},
	{Name: "unknown deletion policy", Spec: "{source: {name: a}, deletionPolicy: Orphan}", Field: "spec.deletionPolicy", Message: "Unsupported value"},
	{Name: "bad key Secret name", Spec: "{source: {name: a}, apiKeySecretRef: {name: Team_Key}}", Field: "spec.apiKeySecretRef.name", Message: "apiKeySecretRef.name must be the name of a Secret"},
	{Name: "unknown field", Spec: "{source: {name: a}, secretName: x}", Field: "spec.secretName", Message: "unknown field"},
}
