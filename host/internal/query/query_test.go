package query

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/host/internal/state"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// fakeSource holds one processor "p" (topic "in", 4 partitions, store
// "s") whose tasks are in held (ready or not); others are at owner.
type fakeSource struct {
	mu     sync.Mutex
	held   map[int32]bool
	data   map[string]string
	owner  string
	gen    int
	during func() // run inside Get, to change the tasks mid-read
	block  chan struct{}
}

func (f *fakeSource) Processor(name string) (string, []string, bool) {
	return "in", []string{"s"}, name == "p"
}
func (f *fakeSource) Partitions(context.Context, string) (int, error) { return 4, nil }
func (f *fakeSource) Task(_ string, p int32) (bool, bool, string, any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ready, held := f.held[p]
	why := ""
	if held && !ready {
		why = "restoring"
	}
	return held, ready, why, f.gen
}
func (f *fakeSource) Get(_ string, _ int32, _ string, key []byte) ([]byte, bool, int64, error) {
	if f.block != nil {
		<-f.block
	}
	if f.during != nil {
		f.during()
	}
	v, ok := f.data[string(key)]
	return []byte(v), ok, 42, nil
}
func (f *fakeSource) Scan(_ string, _ int32, _ string, start, end []byte, limit, _ int) ([]state.KV, bool, int64, error) {
	var out []state.KV
	for _, k := range []string{"a", "b", "c", "d"} {
		if k >= string(start) && (end == nil || k < string(end)) {
			if len(out) == limit {
				return out, true, 7, nil
			}
			out = append(out, state.KV{Key: []byte(k), Value: []byte(f.data[k])})
		}
	}
	return out, false, 7, nil
}
func (f *fakeSource) Owner(string, int32) string { return f.owner }

func allHeld() map[int32]bool { return map[int32]bool{0: true, 1: true, 2: true, 3: true} }

func serve(t *testing.T, f *fakeSource, token string) *httptest.Server {
	srv, _ := serveWith(t, f, token)
	return srv
}

func serveWith(t *testing.T, f *fakeSource, token string) (*httptest.Server, *Server) {
	s := &Server{src: f, token: token, log: slog.New(slog.DiscardHandler), slots: make(chan struct{}, MaxConcurrent)}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv, s
}

func get(t *testing.T, url string, hdr ...string) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp, body
}

func TestGetFormatsAndBounds(t *testing.T) {
	f := &fakeSource{held: allHeld(), data: map[string]string{"a": "1", "\xff": "\x00\xfe", "b": "x"}}
	srv := serve(t, f, "")
	base := srv.URL + "/v1/stores/p/s/keys/"
	for _, c := range []struct {
		path   string
		status int
		want   map[string]any
	}{
		{"a", 200, map[string]any{"key": "a", "value": "1", "found": true, "checkpoint": 42.0, "format": "utf8"}},
		{"nope", 404, map[string]any{"found": false, "checkpoint": 42.0}},
		{"ff?format=hex", 200, map[string]any{"key": "ff", "value": "00fe"}},
		{"%2Fw%3D%3D?format=base64", 200, map[string]any{"key": "/w==", "value": "AP4="}},
		{"_w?format=base64&value_format=hex", 200, map[string]any{"key": "/w==", "value": "00fe", "value_format": "hex"}},
		{"ff?format=hex&value_format=utf8", 422, nil},
		{"zz?format=hex", 400, nil},
		{"a?format=rot13", 400, nil},
		{strings.Repeat("k", MaxKeyBytes+1), 400, nil},
		{"a?partition=4", 400, nil},
	} {
		resp, body := get(t, base+c.path)
		if resp.StatusCode != c.status {
			t.Errorf("%s: %d %v, want %d", c.path, resp.StatusCode, body, c.status)
			continue
		}
		for k, v := range c.want {
			if body[k] != v {
				t.Errorf("%s: %s = %v, want %v (%v)", c.path, k, body[k], v, body)
			}
		}
	}
	for _, path := range []string{"/v1/stores/q/s/keys/a", "/v1/stores/p/t/keys/a"} {
		if resp, _ := get(t, srv.URL+path); resp.StatusCode != 404 {
			t.Errorf("%s: %d, want 404", path, resp.StatusCode)
		}
	}
}

func TestScanBounds(t *testing.T) {
	f := &fakeSource{held: allHeld(), data: map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"}}
	srv := serve(t, f, "")
	base := srv.URL + "/v1/stores/p/s/keys"
	resp, body := get(t, base+"?partition=1&limit=2")
	if resp.StatusCode != 200 || body["more"] != true || body["next"] != "b\x00" || len(body["items"].([]any)) != 2 {
		t.Errorf("a page of 2: %d %v", resp.StatusCode, body)
	}
	resp, body = get(t, base+"?partition=1&prefix=c")
	if resp.StatusCode != 200 || body["more"] != false || len(body["items"].([]any)) != 1 {
		t.Errorf("prefix c: %d %v", resp.StatusCode, body)
	}
	for _, q := range []string{"", "?partition=1&limit=0", "?partition=1&limit=1001", "?partition=x", "?partition=1&prefix=a&from=b"} {
		if resp, body := get(t, base+q); resp.StatusCode != 400 {
			t.Errorf("%q: %d %v, want 400", q, resp.StatusCode, body)
		}
	}
}

func TestWhereTheTaskIs(t *testing.T) {
	f := &fakeSource{held: map[int32]bool{}, data: map[string]string{"a": "1"}, owner: "http://10.0.0.9:9645"}
	srv := serve(t, f, "")
	path := "/v1/stores/p/s/keys/a?value_format=hex"
	resp, _ := get(t, srv.URL+path)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusTemporaryRedirect || !strings.HasPrefix(loc, "http://10.0.0.9:9645/v1/stores/p/s/keys/a?") ||
		!strings.Contains(loc, "hop=1") || !strings.Contains(loc, "value_format=hex") {
		t.Errorf("held elsewhere: %d Location %q, want 307 to the owner with hop=1", resp.StatusCode, loc)
	}
	for name, c := range map[string]struct {
		path  string
		owner string
		held  map[int32]bool
	}{
		"redirected here but not here": {path + "&hop=1", f.owner, map[int32]bool{}},
		"no process known":             {path, "", map[int32]bool{}},
		"restoring":                    {path, "", map[int32]bool{0: false, 1: false, 2: false, 3: false}},
	} {
		f.mu.Lock()
		f.owner, f.held = c.owner, c.held
		f.mu.Unlock()
		resp, body := get(t, srv.URL+c.path)
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || body["error"] == "" {
			t.Errorf("%s: %d %v (Retry-After %q), want 503 with Retry-After", name, resp.StatusCode, body, resp.Header.Get("Retry-After"))
		}
	}
	// The task leaves during the read: what was read is not answered.
	f.held = allHeld()
	f.during = func() {
		f.mu.Lock()
		f.held, f.gen = map[int32]bool{}, f.gen+1
		f.mu.Unlock()
	}
	if resp, body := get(t, srv.URL+path); resp.StatusCode != 503 {
		t.Errorf("revoked during the read: %d %v, want 503", resp.StatusCode, body)
	}
}

func TestTokenAndConcurrency(t *testing.T) {
	f := &fakeSource{held: allHeld(), data: map[string]string{"a": "1"}, block: make(chan struct{})}
	srv, s := serveWith(t, f, "sesame")
	url := srv.URL + "/v1/stores/p/s/keys/a"
	for _, h := range [][]string{nil, {"Authorization", "Bearer nope"}, {"Authorization", "Basic sesame"}} {
		if resp, _ := get(t, url, h...); resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%v: %d, want 401", h, resp.StatusCode)
		}
	}
	// MaxConcurrent reads block in Get; one more is refused.
	var wg sync.WaitGroup
	codes := make(chan int, MaxConcurrent)
	for range MaxConcurrent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _ := get(t, url, "Authorization", "Bearer sesame")
			codes <- resp.StatusCode
		}()
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if n := len(s.slots); n != MaxConcurrent {
			return fmt.Errorf("%d reads in progress, want %d", n, MaxConcurrent)
		}
		return nil
	})
	if resp, _ := get(t, url, "Authorization", "Bearer sesame"); resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a read over the bound: %d, want 503 with Retry-After", resp.StatusCode)
	}
	close(f.block)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Errorf("a read within the bound: %d", c)
		}
	}
}
