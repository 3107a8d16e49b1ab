// Package certs owns the public HTTPS listener's TLS state that the nodes
// of an edge cluster share through the store (edge/store): the session
// ticket keys (tickets.go), sealed with the secrets keyring.
package certs
