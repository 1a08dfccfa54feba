package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// The admin endpoint has no mutating endpoint yet. The ones to come
// (plugin swap, rollback, ...) change what the process does, so they are
// registered through RequireToken: the caller must send
// "Authorization: Bearer <token>".
//
// With no token configured the check is off in the safe direction:
// mutating endpoints are refused, not open. The default bind address is
// loopback, but loopback is not an authentication: any local user, and any
// web page a local browser opens (a cross-site POST needs no preflight),
// can reach it.

// RequireToken serves next only to requests that carry the bearer token.
// An empty token means no token is configured: every request is refused
// with 403, telling how to enable the endpoint. A missing or wrong token
// is refused with 401.
func RequireToken(token string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token == "" {
			http.Error(w, "this endpoint changes the process and is disabled: no admin token is configured", http.StatusForbidden)
			return
		}
		if !BearerOK(r.Header.Get("Authorization"), token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="wasmstream-admin"`)
			http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// BearerOK reports whether an Authorization header value is
// "Bearer <token>" (the scheme is case-insensitive). It is false when
// token is empty. The comparison takes the same time whatever the header
// holds: both sides are hashed first, so neither the position of the first
// wrong byte nor the token's length shows in the timing.
func BearerOK(header, token string) bool {
	if token == "" {
		return false
	}
	scheme, got, ok := strings.Cut(header, " ")
	bearer := ok && strings.EqualFold(scheme, "Bearer")
	if !bearer {
		got = "" // still compare, to keep the timing flat
	}
	want := sha256.Sum256([]byte(token))
	have := sha256.Sum256([]byte(strings.TrimSpace(got)))
	return subtle.ConstantTimeCompare(want[:], have[:]) == 1 && bearer
}
