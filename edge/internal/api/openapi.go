package api

import (
	_ "embed"
	"encoding/json"
	"net/http"

	"code.tuna.am/tuna/k8s-operator/edge/internal/auth"
)

// openAPIDoc is the hand-written OpenAPI 3 description of this API.
//
//go:embed openapi.json
var openAPIDoc []byte

func (s *Server) openAPI(*http.Request, *auth.Principal) (int, any, error) {
	return http.StatusOK, json.RawMessage(openAPIDoc), nil
}
