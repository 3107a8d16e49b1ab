package api

import (
	"fmt"
	"net/http"
	"strconv"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/internal/auth"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

// transferOwners hands the reservations and claims of the owners under one
// prefix to the same owners under another: how the edge's administrator
// gives a lost cluster's addresses to the cluster rebuilt in its place
// (which has another cluster id unless it was set to the old one). It is
// logged as an audit line with the key that asked and what moved.
func (s *Server) transferOwners(r *http.Request, p *auth.Principal) (int, any, error) {
	var in apiwire.OwnerTransfer
	if err := decode(r, &in); err != nil {
		return 0, nil, err
	}
	if err := checkOwner("from", in.From); err != nil {
		return 0, nil, err
	}
	if err := checkOwner("to", in.To); err != nil {
		return 0, nil, err
	}
	if store.UnderPrefix(in.To, in.From) || store.UnderPrefix(in.From, in.To) {
		return 0, nil, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest,
			"from %q and to %q overlap: give two different owner prefixes, e.g. the lost cluster's id and the new cluster's", in.From, in.To)
	}
	t, err := s.st.TransferOwners(in.From, in.To)
	out := apiwire.OwnerTransferResult{From: in.From, To: in.To, Domains: []string{}, TCPEndpoints: []string{}, Claims: []string{}}
	for _, d := range t.Domains {
		out.Domains = append(out.Domains, d.Name)
		s.EndUnshared(protocol.ProtocolHTTP, []string{d.Name}, d.Ownership)
	}
	for _, e := range t.TCPEndpoints {
		out.TCPEndpoints = append(out.TCPEndpoints, e.Alias)
		s.EndUnshared(protocol.ProtocolTCP, []string{e.Alias, strconv.Itoa(e.Port)}, e.Ownership)
	}
	for _, c := range t.Claims {
		out.Claims = append(out.Claims, c.Address)
		s.EndUnshared(protocol.ProtocolHTTP, []string{c.Address}, store.Ownership{Owner: c.Owner})
	}
	// The audit line, also for a transfer cut short: what moved, moved.
	s.log.Info("audit: owner transfer", "from", in.From, "to", in.To, "api_key", p.ID, "api_key_name", p.Name,
		"domains", out.Domains, "tcp_endpoints", out.TCPEndpoints, "claims", out.Claims, "complete", err == nil)
	if err != nil {
		return 0, nil, fmt.Errorf("transferring owners %s to %s (run it again to finish): %w", in.From, in.To, err)
	}
	return http.StatusOK, out, nil
}
