package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// authorized checks the bearer token in constant time. Both sides are hashed
// first so that the comparison does not leak the key's length either.
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.APIKey == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		// Anthropic's clients send the key as x-api-key.
		if got = r.Header.Get("X-Api-Key"); got == "" {
			return false
		}
	}
	a, b := sha256.Sum256([]byte(strings.TrimSpace(got))), sha256.Sum256([]byte(s.cfg.APIKey))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// cors sets the CORS headers for --cors ORIGIN and answers preflight
// requests; it reports whether the request has been answered.
func (s *Server) cors(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.CORSOrigin == "" {
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", s.cfg.CORSOrigin)
	if s.cfg.CORSOrigin != "*" {
		h.Add("Vary", "Origin")
	}
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Api-Key, Anthropic-Version")
		h.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	return false
}
