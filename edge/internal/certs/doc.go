// Package certs owns the public HTTPS listener's TLS state that the nodes
// of an edge cluster share through the store (edge/internal/store): certificates,
// served from a bounded in-memory cache in front of the store and ordered
// by ACME when missing (manager.go, cache.go, acme.go, renew.go), their
// OCSP staples (ocsp.go), and the session ticket keys (tickets.go). Every
// secret it stores is sealed with the secrets keyring.
package certs
