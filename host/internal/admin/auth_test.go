package admin

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestBearerOK(t *testing.T) {
	const token = "s3cret-token"
	for _, c := range []struct {
		header, token string
		want          bool
	}{
		{"Bearer s3cret-token", token, true},
		{"bearer s3cret-token", token, true},
		{"BEARER  s3cret-token ", token, true},
		{"Bearer s3cret-tokem", token, false},
		{"Bearer s3cret-token-and-more", token, false},
		{"Bearer s3cret", token, false},
		{"Bearer ", token, false},
		{"Bearer", token, false},
		{"", token, false},
		{"Basic s3cret-token", token, false},
		{"s3cret-token", token, false},
		{"Token s3cret-token", token, false},
		// No token configured: nothing passes, not even an empty bearer.
		{"Bearer ", "", false},
		{"", "", false},
		{"Bearer anything", "", false},
	} {
		if got := BearerOK(c.header, c.token); got != c.want {
			t.Errorf("BearerOK(%q, %q) = %v, want %v", c.header, c.token, got, c.want)
		}
	}
}

func TestRequireToken(t *testing.T) {
	called := 0
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		called++
		w.WriteHeader(http.StatusNoContent)
	})
	serve := func(token, auth string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/processors/x/swap", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		RequireToken(token, next).ServeHTTP(rec, req)
		return rec
	}

	// No token configured: the mutating endpoint is off (refused).
	if rec := serve("", "Bearer "); rec.Code != http.StatusForbidden {
		t.Errorf("no token configured: %d, want 403", rec.Code)
	}
	if rec := serve("", ""); rec.Code != http.StatusForbidden {
		t.Errorf("no token configured, no header: %d, want 403", rec.Code)
	}
	// Configured: missing or wrong token is 401 with a challenge.
	for _, auth := range []string{"", "Bearer nope", "Basic dTpw"} {
		rec := serve("tok", auth)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("auth %q: %d, want 401", auth, rec.Code)
		}
		if rec.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("auth %q: no WWW-Authenticate challenge", auth)
		}
	}
	if called != 0 {
		t.Fatalf("handler ran %d times without a valid token", called)
	}
	if rec := serve("tok", "Bearer tok"); rec.Code != http.StatusNoContent || called != 1 {
		t.Errorf("valid token: %d (handler ran %d times)", rec.Code, called)
	}
}
