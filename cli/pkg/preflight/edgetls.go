package preflight

import (
	"crypto/x509"
	"errors"
	"strings"

	edgeclient "code.tuna.am/tuna/k8s-operator/edge/client"
)

// unreachableHint tells what to change when the API could not be called:
// most often the pin, since the edge serves a self-signed certificate.
func unreachableHint(err error, trust edgeclient.Trust) string {
	var unknown x509.UnknownAuthorityError
	switch {
	case strings.Contains(err.Error(), "is pinned"):
		return "set edge.apiFingerprint (--edge-api-fingerprint) to what `tuna-edge api-fingerprint` prints on the edge; if it already does, something intercepts the connection"
	case errors.As(err, &unknown) && trust.Fingerprint == "":
		return "the edge's API certificate is not signed by a CA this machine trusts (by default the edge makes a self-signed one): " +
			"set edge.apiFingerprint (--edge-api-fingerprint) to what `tuna-edge api-fingerprint` prints on the edge"
	}
	return "check edge.apiURL and that this machine (and the cluster) can reach it"
}
