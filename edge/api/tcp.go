package api

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"

	"code.tuna.am/tuna/k8s-operator/edge/auth"
	"code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/edge/names"
	"code.tuna.am/tuna/k8s-operator/edge/store"
)

func (s *Server) tcpOut(e store.TCPEndpoint) client.TCPEndpoint {
	return client.TCPEndpoint{
		Alias: e.Alias, Port: e.Port, CreatedAt: e.CreatedAt,
		Address: net.JoinHostPort(s.cfg.PublicTCPHost, strconv.Itoa(e.Port)),
	}
}

func (s *Server) createTCPEndpoint(r *http.Request, _ *auth.Principal) (int, any, error) {
	var in client.CreateTCPEndpoint
	if err := decode(r, &in); err != nil {
		return 0, nil, err
	}
	if err := names.CheckAlias(in.Alias); err != nil {
		return 0, nil, fail(http.StatusBadRequest, client.CodeInvalidRequest, "%v", err)
	}
	e, err := s.st.CreateTCPEndpoint(in.Alias, s.cfg.TCPPortFirst, s.cfg.TCPPortLast, s.cfg.Now())
	switch {
	case errors.Is(err, store.ErrExists):
		return 0, nil, fail(http.StatusConflict, client.CodeNameTaken, "TCP endpoint %q already exists", in.Alias)
	case errors.Is(err, store.ErrExhausted):
		return 0, nil, fail(http.StatusConflict, client.CodePortsExhausted,
			"every port of the edge's TCP range %d-%d is reserved; delete an endpoint or widen the range",
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
	out := client.List[client.TCPEndpoint]{Items: make([]client.TCPEndpoint, 0, len(recs))}
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

func (s *Server) deleteTCPEndpoint(r *http.Request, _ *auth.Principal) (int, any, error) {
	alias := r.PathValue("alias")
	if err := s.st.DeleteTCPEndpoint(alias); errors.Is(err, store.ErrNotFound) {
		return 0, nil, notFound("TCP endpoint", alias)
	} else if err != nil {
		return 0, nil, fmt.Errorf("deleting TCP endpoint: %w", err)
	}
	return http.StatusNoContent, nil, nil
}
