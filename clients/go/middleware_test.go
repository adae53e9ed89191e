package sluice_test

// The net/http middleware in a real server (httptest) in front of a real sluiced.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	sluice "github.com/sluice-rs/sluice/clients/go"
	"github.com/sluice-rs/sluice/clients/go/internal/sluicetest"
)

type answer struct {
	status int
	header http.Header
	body   []byte
}

func get(t *testing.T, url string, header ...string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, body}
}

// app is a service whose routes are each behind their own middleware.
func app(t *testing.T, c *sluice.Client, routes map[string]sluice.Options) string {
	t.Helper()
	mux := http.NewServeMux()
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	for path, opts := range routes {
		mux.Handle(path, sluice.Middleware(c, opts)(ok))
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// userHeader is how these tests' app knows its user: the X-User header.
func userHeader(r *http.Request) string { return r.Header.Get("X-User") }

func TestMiddlewareHeadersOnEveryAnswerAndSluicedsDenial(t *testing.T) {
	d := sluicetest.Start(t, "", sluicetest.Policies)
	c, _ := newClient(t, d.Socket)
	url := app(t, c, map[string]sluice.Options{"/": {Policy: "fixed", UserFunc: userHeader}})
	for want := 2; want >= 0; want-- {
		a := get(t, url+"/items/1")
		if a.status != 200 || string(a.body) != "ok" {
			t.Fatalf("allowed request: %d %s", a.status, a.body)
		}
		if a.header.Get("X-RateLimit-Limit") != "3" || a.header.Get("X-RateLimit-Remaining") != string(rune('0'+want)) ||
			a.header.Get("X-RateLimit-Reset") == "" || a.header.Get("RateLimit") == "" || a.header.Get("RateLimit-Policy") == "" {
			t.Errorf("allowed answer's headers: %v", a.header)
		}
		if a.header.Get("Retry-After") != "" {
			t.Errorf("allowed answer with Retry-After")
		}
	}
	// The denial is exactly what sluiced says to a direct call, compared between two direct
	// calls that agree (a second boundary between them would change Retry-After).
	for try := 0; ; try++ {
		before := check(t, c, sluice.Check{Policy: "fixed", Key: "ip:127.0.0.1"})
		a := get(t, url+"/items/1")
		after := check(t, c, sluice.Check{Policy: "fixed", Key: "ip:127.0.0.1"})
		if !bytes.Equal(before.Body, after.Body) && try < 5 {
			continue
		}
		if before.Status != 429 || a.status != 429 {
			t.Fatalf("limit reached: sluiced %d, app %d", before.Status, a.status)
		}
		if !bytes.Equal(a.body, before.Body) {
			t.Errorf("denial body %s, sluiced's %s", a.body, before.Body)
		}
		if ct := a.header.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("denial Content-Type %q", ct)
		}
		if a.header.Get("Retry-After") == "" {
			t.Errorf("denial without Retry-After")
		}
		sluicetest.SameRateLimitHeaders(t, a.header, before.Header)
		break
	}
	// Another key keeps its quota.
	if a := get(t, url+"/items/1", "X-User", "bob"); a.status != 200 || a.header.Get("X-RateLimit-Remaining") != "2" {
		t.Errorf("another key: %d remaining %q", a.status, a.header.Get("X-RateLimit-Remaining"))
	}
	if got := check(t, c, sluice.Check{Policy: "fixed", Key: "user:bob", Peek: true}); got.Remaining != 2 {
		t.Errorf("user key not user:bob: its remaining is %d", got.Remaining)
	}
}

func TestMiddlewareFailsOpenOrClosedThenRecovers(t *testing.T) {
	d := sluicetest.Start(t, "", sluicetest.Policies)
	c, logs := newClient(t, d.Socket)
	url := app(t, c, map[string]sluice.Options{
		"/open":   {Policy: "fixed"},
		"/closed": {Policy: "fixed", FailClosed: true},
	})
	if a := get(t, url+"/open"); a.status != 200 || a.header.Get("X-RateLimit-Remaining") != "2" {
		t.Fatalf("daemon up: %d %v", a.status, a.header)
	}
	d.Stop()
	a := get(t, url+"/open")
	if a.status != 200 || string(a.body) != "ok" {
		t.Errorf("fail open: %d %s", a.status, a.body)
	}
	sluicetest.NoRateLimitHeaders(t, a.header)
	a = get(t, url+"/closed")
	var body struct{ Error, Message string }
	if a.status != 503 || a.header.Get("Retry-After") != "1" || a.header.Get("Content-Type") != "application/json" ||
		json.Unmarshal(a.body, &body) != nil || body.Error != "rate_limiter_unavailable" || body.Message == "" {
		t.Errorf("fail closed: %d %v %s", a.status, a.header, a.body)
	}
	if s := c.Stats(); s.Unavailable != 2 {
		t.Errorf("stats %+v, want 2 unavailable", s)
	}
	if logs.String() == "" {
		t.Errorf("the failure was not logged")
	}
	d.Restart(t)
	if a := get(t, url+"/open"); a.status != 200 || a.header.Get("X-RateLimit-Remaining") != "2" {
		t.Errorf("after restart: %d %v", a.status, a.header)
	}
}

func TestMiddlewareFailsOpenWithinTheTimeoutOnAFrozenDaemon(t *testing.T) {
	d := sluicetest.Start(t, "", sluicetest.Policies)
	c, _ := newClientTimeout(t, d.Socket, 0) // the default, 50 ms
	url := app(t, c, map[string]sluice.Options{"/": {Policy: "fixed"}})
	d.Freeze(t)
	a := get(t, url+"/")
	if a.status != 200 {
		t.Errorf("frozen daemon: %d", a.status)
	}
	sluicetest.NoRateLimitHeaders(t, a.header)
}

func TestMiddlewareCostAndTier(t *testing.T) {
	d := sluicetest.Start(t, "", sluicetest.Policies)
	c, _ := newClient(t, d.Socket)
	url := app(t, c, map[string]sluice.Options{
		"/cost": {Policy: "fixed", Cost: 2, Key: func(*http.Request) string { return "cost" }},
		"/tier": {Policy: "fixed", TierFunc: func(r *http.Request) string { return r.Header.Get("X-Plan") },
			CostFunc: func(*http.Request) int64 { return 3 }, Key: func(*http.Request) string { return "tier" }},
	})
	if a := get(t, url+"/cost"); a.header.Get("X-RateLimit-Remaining") != "1" {
		t.Errorf("cost 2: remaining %q", a.header.Get("X-RateLimit-Remaining"))
	}
	a := get(t, url+"/tier", "X-Plan", "pro")
	if a.header.Get("X-RateLimit-Limit") != "10" || a.header.Get("X-RateLimit-Remaining") != "7" {
		t.Errorf("tier pro, cost 3: %v", a.header)
	}
}

func TestMiddlewarePassesSluicedsOwn503Through(t *testing.T) {
	d := sluicetest.Start(t, "", sluicetest.DownBackend(t))
	c, _ := newClient(t, d.Socket)
	url := app(t, c, map[string]sluice.Options{"/closed": {Policy: "closed"}, "/open": {Policy: "open"}})
	direct := check(t, c, sluice.Check{Policy: "closed", Key: "ip:127.0.0.1"})
	a := get(t, url+"/closed")
	if direct.Status != 503 || a.status != 503 || !bytes.Equal(a.body, direct.Body) || a.header.Get("Retry-After") != "1" {
		t.Errorf("sluiced's 503: direct %d %s, app %d %s %v", direct.Status, direct.Body, a.status, a.body, a.header)
	}
	sluicetest.SameRateLimitHeaders(t, a.header, direct.Header)
	a = get(t, url+"/open")
	if a.status != 200 || a.header.Get("X-RateLimit-Degraded") != "1" {
		t.Errorf("degraded: %d %v", a.status, a.header)
	}
}

func TestMiddlewareDenialIsReplaceable(t *testing.T) {
	d := sluicetest.Start(t, "", sluicetest.Policies)
	c, _ := newClient(t, d.Socket)
	url := app(t, c, map[string]sluice.Options{"/": {Policy: "fixed", Cost: 3,
		Deny: func(w http.ResponseWriter, _ *http.Request, d sluice.Decision) {
			w.WriteHeader(http.StatusTeapot)
			_, _ = w.Write([]byte("slow down"))
		}}})
	get(t, url+"/")
	a := get(t, url+"/")
	if a.status != http.StatusTeapot || string(a.body) != "slow down" || a.header.Get("Retry-After") == "" {
		t.Errorf("replaced denial: %d %s %v", a.status, a.body, a.header)
	}
}

func TestClientAddrBehindTrustedProxies(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	cases := []struct{ remote, xff, want string }{
		{"192.0.2.1:4000", "203.0.113.9", "192.0.2.1"},                          // untrusted peer: its XFF is ignored
		{"10.0.0.2:4000", "203.0.113.9", "203.0.113.9"},                         // one trusted proxy
		{"10.0.0.2:4000", "198.51.100.7, 203.0.113.9, 10.0.0.3", "203.0.113.9"}, // spoofed left entry ignored
		{"10.0.0.2:4000", "", "10.0.0.2"},                                       // no header
		{"10.0.0.2:4000", "10.0.0.5", "10.0.0.5"},                               // every hop trusted: the left-most
		{"10.0.0.2:4000", "garbage, 10.0.0.4", "10.0.0.4"},                      // broken chain: the last trusted hop
		{"[::1]:4000", "2001:db8::1", "2001:db8::1"},
	}
	for _, tc := range cases {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = tc.remote
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := sluice.ClientAddr(r, trusted); got != tc.want {
			t.Errorf("remote %s xff %q: %s, want %s", tc.remote, tc.xff, got, tc.want)
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.2:1"
	r.Header.Set("X-Forwarded-For", "203.0.113.9")
	if got := sluice.ClientAddr(r, nil); got != "10.0.0.2" {
		t.Errorf("no trusted proxies: %s", got)
	}
}
