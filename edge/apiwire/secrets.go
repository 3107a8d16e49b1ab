package apiwire

import (
	"time"
)

// Scopes of the secrets API. A full key holds both; a tunnel key and a
// tunnels:write key hold neither.
const (
	// ScopeSecretsRead lists secrets and reads their values.
	ScopeSecretsRead = "secrets:read"
	// ScopeSecretsWrite creates, replaces and deletes secrets (it does not
	// read values: pair it with secrets:read for that).
	ScopeSecretsWrite = "secrets:write"
)

// Error codes of the secrets API.
const (
	// CodeVersionConflict: PUT with expected_version found another version.
	CodeVersionConflict = "version_conflict"
	// CodeSecretsDisabled: the edge has no encryption key for secrets.
	CodeSecretsDisabled = "secrets_disabled"
	// CodeLimitExceeded: a configured limit of the edge was reached.
	CodeLimitExceeded = "limit_exceeded"
)

// SecretInfo is a secret without its values: what lists return. Version
// starts at 1 and grows by one with every change of the data; a PUT of
// the same data changes nothing.
type SecretInfo struct {
	Name    string `json:"name"`
	Version int64  `json:"version"`
	// Keys are the names of the secret's values, sorted.
	Keys      []string  `json:"keys"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Secret is a secret with its values (GET /v1/secrets/{name}).
type Secret struct {
	SecretInfo
	// Data maps key names (as in a Kubernetes Secret: letters, digits,
	// '-', '_', '.') to values; base64 in JSON.
	Data map[string][]byte `json:"data"`
}

// PutSecret is the body of PUT /v1/secrets/{name}: it creates the secret
// or replaces all of its data.
type PutSecret struct {
	Data map[string][]byte `json:"data"`
	// ExpectedVersion, when set, makes the write conditional: the secret
	// must be at this version (0: must not exist yet), or the answer is
	// 409 version_conflict.
	ExpectedVersion *int64 `json:"expected_version,omitempty"`
}

// SecretList is GET /v1/secrets: the secrets the key may see, sorted by
// name, and an ETag of exactly this list (names and versions).
type SecretList struct {
	Items []SecretInfo `json:"items"`
	// ETag is the response's ETag header; pass it to WatchSecrets.
	ETag string `json:"-"`
}
