package store

import (
	"errors"
	"fmt"
)

// The store's rules (ownership, claims, port choice, secrets' counts) are
// written once, against tx; a backend only supplies transactions over
// buckets of keys. Two exist: bbolt, the embedded default for one edge
// (bolt.go), and etcd, shared by the nodes of a cluster (etcd.go).

// tx is one transaction's view of the state: reads see the transaction's
// own writes, and an update commits all of its writes or none.
type tx interface {
	// get returns the value under key, or nil when there is none.
	get(bucket, key string) ([]byte, error)
	put(bucket, key string, value []byte) error
	// del removes key; removing a missing key is not an error.
	del(bucket, key string) error
	// each calls fn for every key of bucket that starts with prefix, in
	// key order.
	each(bucket, prefix string, fn func(key string, value []byte) error) error
	// scan calls fn for the keys of bucket after after, in key order,
	// until fn returns false: it reads what fn looks at, not the whole
	// bucket. Only in a read-only transaction, and fn must not write.
	scan(bucket, after string, fn func(key string, value []byte) (more bool, err error)) error
}

// backend runs transactions. update may run fn more than once (etcd retries
// a transaction that lost a race), so fn must not keep effects of an
// attempt that did not commit.
type backend interface {
	view(fn func(tx) error) error
	// update returns the revision the commit created (0 for bbolt, and
	// when fn wrote nothing).
	update(fn func(tx) error) (int64, error)
	close() error
}

// ErrUnavailable wraps every failure to reach the state store: etcd lost
// quorum, is unreachable or too slow. The API answers it with 503
// state_unavailable; nothing that serves live traffic depends on it.
var ErrUnavailable = errors.New("state store unavailable")

func unavailable(op string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
}

// Buckets: each is a namespace of keys, a bbolt bucket or an etcd prefix.
const (
	bucketAPIKeys      = "api_keys"
	bucketTunnelKeys   = "tunnel_keys"
	bucketDomains      = "domains"
	bucketTCP          = "tcp_endpoints"
	bucketMeta         = "meta"
	bucketClaims       = "address_claims"
	bucketSecrets      = "secrets"
	bucketSecretValues = "secret_values"
	// bucketAccessPolicies, bucketAccessKeys and bucketLinkUses hold the
	// access policies, the access keys and the uses of shared links
	// (access.go).
	bucketAccessPolicies = "access_policies"
	bucketAccessKeys     = "access_keys"
	bucketLinkUses       = "access_link_uses"
)

// dataBuckets are the buckets a migration copies: every record but the
// legacy meta bucket, which only ever held the host key.
var dataBuckets = []string{bucketAPIKeys, bucketTunnelKeys, bucketDomains, bucketTCP, bucketClaims,
	bucketSecrets, bucketSecretValues, bucketAccessPolicies, bucketAccessKeys, bucketLinkUses,
	bucketTLSCerts, bucketTLSDates}

// tlsBuckets hold the rest of the HTTPS listener's shared state (tls.go),
// which is not migrated: session ticket keys live hours, and ACME orders
// and challenges minutes; the ACME account is registered again.
var tlsBuckets = []string{bucketTicketKeys, bucketACME}

var allBuckets = append(append([]string{bucketMeta}, dataBuckets...), tlsBuckets...)
