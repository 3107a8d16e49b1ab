package api

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/internal/auth"
	"code.tuna.am/tuna/k8s-operator/edge/internal/names"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
	"code.tuna.am/tuna/k8s-operator/edge/internal/tcpports"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

func (s *Server) tcpOut(e store.TCPEndpoint) apiwire.TCPEndpoint {
	return apiwire.TCPEndpoint{
		Alias: e.Alias, Port: e.Port, Sharing: sharingOut(e.Ownership), CreatedAt: e.CreatedAt,
		Address: net.JoinHostPort(s.cfg.PublicTCPHost, strconv.Itoa(e.Port)),
	}
}

func (s *Server) createTCPEndpoint(r *http.Request, p *auth.Principal) (int, any, error) {
	var in apiwire.CreateTCPEndpoint
	if err := decode(r, &in); err != nil {
		return 0, nil, err
	}
	if err := (actor{p: p}).mayCreateFor(in.Owner); err != nil {
		return 0, nil, err
	}
	if err := names.CheckAlias(in.Alias); err != nil {
		return 0, nil, fail(http.StatusBadRequest, apiwire.CodeInvalidRequest, "%v", err)
	}
	own, err := checkSharing(in.Sharing)
	if err != nil {
		return 0, nil, err
	}
	// The port manager binds the port before the reservation is recorded,
	// so a port another process holds is skipped rather than handed out.
	picked := 0
	rec := store.TCPEndpoint{Alias: in.Alias, Ownership: own, CreatedAt: s.cfg.Now()}
	e, err := s.st.CreateTCPEndpoint(rec, func(taken map[int]bool) (int, error) {
		// A shared store runs the transaction again when another node
		// won a race: the port of the lost attempt goes back first.
		if picked != 0 {
			s.cfg.Ports.Release(picked)
		}
		p, err := s.cfg.Ports.Pick(taken)
		picked = p
		return p, err
	})
	if err != nil && picked != 0 {
		s.cfg.Ports.Release(picked)
	}
	switch {
	case errors.Is(err, store.ErrExists):
		return 0, nil, fail(http.StatusConflict, apiwire.CodeNameTaken, "TCP endpoint %q already exists", in.Alias)
	case errors.Is(err, tcpports.ErrExhausted):
		return 0, nil, fail(http.StatusConflict, apiwire.CodePortsExhausted,
			"every port of the edge's TCP range %d-%d is reserved or held by another process on the edge host; delete an endpoint, free the ports or widen the range",
			s.cfg.TCPPortFirst, s.cfg.TCPPortLast)
	case err != nil:
		return 0, nil, fmt.Errorf("reserving TCP endpoint: %w", err)
	}
	return http.StatusCreated, s.tcpOut(e), nil
}

func (s *Server) listTCPEndpoints(*http.Request, *auth.Principal) (int, any, error) {
	recs, err := s.st.ListTCPEndpoints()
	if err != nil {
		return 0, nil, fmt.Errorf("listing TCP endpoints: %w", err)
	}
	out := apiwire.List[apiwire.TCPEndpoint]{Items: make([]apiwire.TCPEndpoint, 0, len(recs))}
	for _, e := range recs {
		out.Items = append(out.Items, s.tcpOut(e))
	}
	return http.StatusOK, out, nil
}

func (s *Server) getTCPEndpoint(r *http.Request, _ *auth.Principal) (int, any, error) {
	alias := r.PathValue("alias")
	e, err := s.st.GetTCPEndpoint(alias)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, notFound("TCP endpoint", alias)
	} else if err != nil {
		return 0, nil, fmt.Errorf("reading TCP endpoint: %w", err)
	}
	return http.StatusOK, s.tcpOut(e), nil
}

func (s *Server) deleteTCPEndpoint(r *http.Request, p *auth.Principal) (int, any, error) {
	a, err := actorOf(r, p)
	if err != nil {
		return 0, nil, err
	}
	alias := r.PathValue("alias")
	e, err := s.st.DeleteTCPEndpoint(alias, func(o store.Ownership) error { return a.mayManage(alias, o) })
	var ae *apiError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return 0, nil, notFound("TCP endpoint", alias)
	case errors.As(err, &ae):
		return 0, nil, ae
	case err != nil:
		return 0, nil, fmt.Errorf("deleting TCP endpoint: %w", err)
	}
	// The address is gone: nobody may keep serving it.
	s.cfg.Ports.Release(e.Port)
	s.reg.TerminatePort(e.Port, protocol.CodeAddressNotFound,
		fmt.Sprintf("TCP endpoint %s (port %d) was deleted", alias, e.Port))
	return http.StatusNoContent, nil, nil
}
