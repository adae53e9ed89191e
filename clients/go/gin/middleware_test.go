package sluicegin_test

// The gin middleware in a real gin engine served over loopback, in front of a real sluiced.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	sluice "github.com/sluice-rs/sluice/clients/go"
	sluicegin "github.com/sluice-rs/sluice/clients/go/gin"
	"github.com/sluice-rs/sluice/clients/go/internal/sluicetest"
)

func init() { gin.SetMode(gin.TestMode) }

type answer struct {
	status int
	header http.Header
	body   []byte
}

func do(t *testing.T, req *http.Request) answer {
	t.Helper()
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

func get(t *testing.T, url string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, req)
}

// client is patient (5 s) where sluiced must answer, since a loaded CI machine can take
// longer than the 50 ms default to schedule the daemon; timeout 0 is the default.
func client(t *testing.T, d *sluicetest.Daemon, timeout ...time.Duration) *sluice.Client {
	t.Helper()
	opts := sluice.ClientOptions{Target: d.Socket, Timeout: 5 * time.Second, Logger: log.New(io.Discard, "", 0)}
	if len(timeout) > 0 {
		opts.Timeout = timeout[0]
	}
	c, err := sluice.NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func serve(t *testing.T, r *gin.Engine) string {
	t.Helper()
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv.URL
}

func ok(c *gin.Context) { c.String(http.StatusOK, "ok") }

func TestOneLineGivesHeadersDenialAndRoutePattern(t *testing.T) {
	metrics := sluicetest.FreeAddr(t)
	d := sluicetest.Start(t, "http = \"\"\nmetrics = \""+metrics+"\"", sluicetest.Policies)
	c := client(t, d)
	r := gin.New()
	r.Use(sluicegin.Middleware(c, sluicegin.Options{Policy: "fixed"}))
	r.GET("/items/:id", ok)
	url := serve(t, r)

	for want := 2; want >= 0; want-- {
		a := get(t, url+"/items/7")
		if a.status != 200 || a.header.Get("X-RateLimit-Limit") != "3" ||
			a.header.Get("X-RateLimit-Remaining") != string(rune('0'+want)) || a.header.Get("RateLimit") == "" ||
			a.header.Get("RateLimit-Policy") == "" || a.header.Get("X-RateLimit-Reset") == "" || a.header.Get("Retry-After") != "" {
			t.Fatalf("allowed: %d %v", a.status, a.header)
		}
	}
	for try := 0; ; try++ {
		before, err := c.Check(context.Background(), sluice.Check{Policy: "fixed", Key: "ip:127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		a := get(t, url+"/items/7")
		after, err := c.Check(context.Background(), sluice.Check{Policy: "fixed", Key: "ip:127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(before.Body, after.Body) && try < 5 {
			continue
		}
		if a.status != 429 || !bytes.Equal(a.body, before.Body) || a.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("denial: %d %s %v; sluiced said %s", a.status, a.body, a.header, before.Body)
		}
		sluicetest.SameRateLimitHeaders(t, a.header, before.Header)
		break
	}
	// The endpoint label is the route pattern, not the path.
	a := get(t, "http://"+metrics+"/metrics")
	if !strings.Contains(string(a.body), `endpoint="/items/:id"`) {
		t.Errorf("no endpoint=\"/items/:id\" series in sluiced's metrics")
	}
}

func TestBasicAuthUserIsTheKey(t *testing.T) {
	d := sluicetest.Start(t, "", sluicetest.Policies)
	c := client(t, d)
	r := gin.New()
	r.Use(gin.BasicAuth(gin.Accounts{"alice": "pw"}), sluicegin.Middleware(c, sluicegin.Options{Policy: "fixed"}))
	r.GET("/", ok)
	url := serve(t, r)
	req, _ := http.NewRequest(http.MethodGet, url+"/", nil)
	req.SetBasicAuth("alice", "pw")
	if a := do(t, req); a.status != 200 || a.header.Get("X-RateLimit-Remaining") != "2" {
		t.Fatalf("alice: %d %v", a.status, a.header)
	}
	got, err := c.Check(context.Background(), sluice.Check{Policy: "fixed", Key: "user:alice", Peek: true})
	if err != nil || got.Remaining != 2 {
		t.Errorf("user:alice was not the key: %+v %v", got, err)
	}
	// Another key (the address) keeps its quota.
	got, err = c.Check(context.Background(), sluice.Check{Policy: "fixed", Key: "ip:127.0.0.1", Peek: true})
	if err != nil || got.Remaining != 3 {
		t.Errorf("ip key touched: %+v %v", got, err)
	}
}

func TestFailOpenClosedFrozenAndRestart(t *testing.T) {
	d := sluicetest.Start(t, "", sluicetest.Policies)
	c := client(t, d)
	fast := client(t, d, 0)
	r := gin.New()
	r.GET("/open", sluicegin.Middleware(c, sluicegin.Options{Policy: "fixed"}), ok)
	r.GET("/fast", sluicegin.Middleware(fast, sluicegin.Options{Policy: "fixed"}), ok)
	r.GET("/closed", sluicegin.Middleware(c, sluicegin.Options{Policy: "fixed", FailClosed: true}), ok)
	url := serve(t, r)
	if a := get(t, url+"/open"); a.status != 200 || a.header.Get("X-RateLimit-Remaining") != "2" {
		t.Fatalf("up: %d %v", a.status, a.header)
	}

	d.Freeze(t)
	a := get(t, url+"/fast")
	d.Thaw(t)
	if a.status != 200 || string(a.body) != "ok" {
		t.Errorf("frozen, fail open: %d %s", a.status, a.body)
	}
	sluicetest.NoRateLimitHeaders(t, a.header)

	d.Stop()
	a = get(t, url+"/open")
	if a.status != 200 || string(a.body) != "ok" {
		t.Errorf("stopped, fail open: %d %s", a.status, a.body)
	}
	sluicetest.NoRateLimitHeaders(t, a.header)
	a = get(t, url+"/closed")
	var body struct{ Error string }
	if a.status != 503 || a.header.Get("Retry-After") != "1" || json.Unmarshal(a.body, &body) != nil || body.Error != "rate_limiter_unavailable" {
		t.Errorf("stopped, fail closed: %d %s %v", a.status, a.body, a.header)
	}
	if s := c.Stats(); s.Unavailable != 2 {
		t.Errorf("stats %+v, want 2 unavailable", s)
	}

	d.Restart(t)
	if a := get(t, url+"/open"); a.status != 200 || a.header.Get("X-RateLimit-Limit") != "3" {
		t.Errorf("after restart: %d %v", a.status, a.header)
	}
}

func TestCostTierPassThroughAndDeny(t *testing.T) {
	d := sluicetest.Start(t, "", sluicetest.Policies)
	c := client(t, d)
	down := sluicetest.Start(t, "", sluicetest.DownBackend(t))
	cd := client(t, down)
	r := gin.New()
	r.GET("/cost", sluicegin.Middleware(c, sluicegin.Options{Policy: "fixed", Cost: 2,
		Key: func(*gin.Context) string { return "cost" }}), ok)
	r.GET("/tier", sluicegin.Middleware(c, sluicegin.Options{Policy: "fixed",
		TierFunc: func(c *gin.Context) string { return c.GetHeader("X-Plan") },
		CostFunc: func(*gin.Context) int64 { return 4 },
		Key:      func(*gin.Context) string { return "tier" }}), ok)
	r.GET("/deny", sluicegin.Middleware(c, sluicegin.Options{Policy: "fixed", Cost: 3,
		Key: func(*gin.Context) string { return "deny" },
		Deny: func(c *gin.Context, d sluice.Decision) {
			c.JSON(http.StatusTooManyRequests, gin.H{"wait": d.RetryAfter})
		}}), ok)
	r.GET("/down", sluicegin.Middleware(cd, sluicegin.Options{Policy: "closed"}), ok)
	url := serve(t, r)

	if a := get(t, url+"/cost"); a.header.Get("X-RateLimit-Remaining") != "1" {
		t.Errorf("cost 2: %v", a.header)
	}
	req, _ := http.NewRequest(http.MethodGet, url+"/tier", nil)
	req.Header.Set("X-Plan", "pro")
	if a := do(t, req); a.header.Get("X-RateLimit-Limit") != "10" || a.header.Get("X-RateLimit-Remaining") != "6" {
		t.Errorf("tier pro, cost 4: %v", a.header)
	}
	get(t, url+"/deny")
	if a := get(t, url+"/deny"); a.status != 429 || !strings.Contains(string(a.body), `"wait"`) || a.header.Get("Retry-After") == "" {
		t.Errorf("replaced denial: %d %s %v", a.status, a.body, a.header)
	}
	direct, err := cd.Check(context.Background(), sluice.Check{Policy: "closed", Key: "ip:127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	a := get(t, url+"/down")
	if direct.Status != 503 || a.status != 503 || !bytes.Equal(a.body, direct.Body) || a.header.Get("Retry-After") != "1" {
		t.Errorf("sluiced's 503: direct %d %s, app %d %s", direct.Status, direct.Body, a.status, a.body)
	}
}
