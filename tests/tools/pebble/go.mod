// Tools module for pebble, Let's Encrypt's small ACME test server, which the
// edge's ACME tests run against. Kept apart from the product module and from
// the kube-apiserver tools module so that neither dependency graph moves the
// other.
module code.tuna.am/tuna/k8s-operator/tests/tools/pebble

go 1.26.0

tool github.com/letsencrypt/pebble/v2/cmd/pebble

require (
	github.com/go-jose/go-jose/v4 v4.1.8 // indirect
	github.com/letsencrypt/challtestsrv v1.4.2 // indirect
	github.com/letsencrypt/pebble/v2 v2.10.3 // indirect
	github.com/miekg/dns v1.1.62 // indirect
	golang.org/x/mod v0.24.0 // indirect
	golang.org/x/net v0.55.0 // indirect
	golang.org/x/sync v0.14.0 // indirect
	golang.org/x/sys v0.45.0 // indirect
	golang.org/x/tools v0.33.0 // indirect
)
