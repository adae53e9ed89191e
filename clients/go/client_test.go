package sluice_test

// The client against a real sluiced: decisions, batch, sluiced's refusals, a stopped, a
// frozen and a restarted daemon, the TCP listener, and answers that are not sluiced's.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sluice "github.com/sluice-rs/sluice/clients/go"
	"github.com/sluice-rs/sluice/clients/go/internal/sluicetest"
)

// syncBuffer is a log sink the client's goroutines and the test may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// patient is the timeout of the tests' clients where sluiced must answer: CI machines run
// many builds at once, and a loaded one can take longer than the 50 ms default to schedule
// the daemon. The tests of timeouts use the default.
const patient = 5 * time.Second

func newClient(t *testing.T, target string) (*sluice.Client, *syncBuffer) {
	t.Helper()
	return newClientTimeout(t, target, patient)
}

func newClientTimeout(t *testing.T, target string, timeout time.Duration) (*sluice.Client, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	c, err := sluice.NewClient(sluice.ClientOptions{Target: target, Timeout: timeout, Logger: log.New(logs, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, logs
}

func check(t *testing.T, c *sluice.Client, chk sluice.Check) sluice.Decision {
	t.Helper()
	d, err := c.Check(context.Background(), chk)
	if err != nil {
		t.Fatalf("check %+v: %v", chk, err)
	}
	return d
}

func TestCheckCountsDownThenDenies(t *testing.T) {
	d := sluicetest.Start(t, "", sluicetest.Policies)
	c, _ := newClient(t, d.Socket)
	for want := int64(2); want >= 0; want-- {
		got := check(t, c, sluice.Check{Policy: "fixed", Key: "user:1"})
		if !got.Allowed || got.Status != 200 || got.Limit != 3 || got.Remaining != want || got.Policy != "fixed" {
			t.Fatalf("allowed check: %+v, want remaining %d", got, want)
		}
		for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit", "RateLimit-Policy"} {
			if got.Header.Get(h) == "" {
				t.Errorf("allowed answer without %s: %v", h, got.Header)
			}
		}
		if got.Header.Get("Retry-After") != "" {
			t.Errorf("allowed answer with Retry-After")
		}
	}
	denied := check(t, c, sluice.Check{Policy: "fixed", Key: "user:1"})
	if denied.Allowed || denied.Status != 429 || denied.RetryAfter < 1 || denied.Error != "rate_limit_exceeded" {
		t.Fatalf("denied check: %+v", denied)
	}
	if denied.Header.Get("Retry-After") == "" {
		t.Errorf("denial without Retry-After: %v", denied.Header)
	}
	var problem struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal(denied.Body, &problem); err != nil || problem.Status != 429 || !strings.Contains(problem.Type, "quota-exceeded") {
		t.Errorf("denial body is not sluiced's problem document: %s (%v)", denied.Body, err)
	}
	other := check(t, c, sluice.Check{Policy: "fixed", Key: "user:2"})
	if !other.Allowed || other.Remaining != 2 {
		t.Errorf("another key lost its quota: %+v", other)
	}
}

func TestCheckCostTierAndPeek(t *testing.T) {
	d := sluicetest.Start(t, "", sluicetest.Policies)
	c, _ := newClient(t, d.Socket)
	if got := check(t, c, sluice.Check{Policy: "fixed", Key: "k", Cost: 2}); got.Remaining != 1 {
		t.Errorf("cost 2: remaining %d, want 1", got.Remaining)
	}
	if got := check(t, c, sluice.Check{Policy: "fixed", Key: "k", Peek: true}); !got.Allowed || got.Remaining != 1 {
		t.Errorf("peek: %+v, want allowed with remaining 1", got)
	}
	if got := check(t, c, sluice.Check{Policy: "fixed", Key: "k", Peek: true}); got.Remaining != 1 {
		t.Errorf("a peek consumed: remaining %d", got.Remaining)
	}
	got := check(t, c, sluice.Check{Policy: "fixed", Key: "t", Tier: "pro", Endpoint: "/items/:id"})
	if got.Limit != 10 || got.Remaining != 9 {
		t.Errorf("tier pro: limit %d remaining %d, want 10 and 9", got.Limit, got.Remaining)
	}
}

func TestCheckBatchIsAllOrNothing(t *testing.T) {
	d := sluicetest.Start(t, "", sluicetest.Policies)
	c, _ := newClient(t, d.Socket)
	ctx := context.Background()
	b, err := c.CheckBatch(ctx, []sluice.Check{{Policy: "fixed", Key: "a"}, {Policy: "fixed", Key: "b"}})
	if err != nil || !b.Allowed || b.Status != 200 || len(b.Results) != 2 || b.Results[0].Remaining != 2 || b.Results[1].Remaining != 2 {
		t.Fatalf("batch: %+v %v", b, err)
	}
	b, err = c.CheckBatch(ctx, []sluice.Check{{Policy: "fixed", Key: "a"}, {Policy: "fixed", Key: "b", Cost: 3}})
	if err != nil || b.Allowed || b.Status != 429 || len(b.Results) != 2 || b.Results[1].Allowed || b.Header.Get("Retry-After") == "" {
		t.Fatalf("denied batch: %+v %v", b, err)
	}
	if got := check(t, c, sluice.Check{Policy: "fixed", Key: "a", Peek: true}); got.Remaining != 2 {
		t.Errorf("a denied batch consumed: remaining %d, want 2", got.Remaining)
	}
	var api *sluice.APIError
	if _, err := c.CheckBatch(ctx, make([]sluice.Check, 65)); !errors.As(err, &api) || api.Code != "bad_request" {
		t.Errorf("65 checks: %v, want sluiced's bad_request", err)
	}
}

func TestRefusalsAreAPIErrorsAndLogged(t *testing.T) {
	d := sluicetest.Start(t, "", sluicetest.Policies)
	c, logs := newClient(t, d.Socket)
	_, err := c.Check(context.Background(), sluice.Check{Policy: "nope", Key: "k"})
	var api *sluice.APIError
	if !errors.As(err, &api) || api.Status != 404 || api.Code != "unknown_policy" || api.Message == "" {
		t.Fatalf("unknown policy: %v", err)
	}
	if errors.Is(err, sluice.ErrUnavailable) {
		t.Errorf("a refusal is not unavailability")
	}
	_, err = c.Check(context.Background(), sluice.Check{Policy: "fixed", Key: ""})
	if !errors.As(err, &api) || api.Status != 400 || api.Code != "bad_request" {
		t.Fatalf("empty key: %v", err)
	}
	if s := c.Stats(); s.Refused != 2 || s.Unavailable != 0 || s.Checks != 2 {
		t.Errorf("stats: %+v", s)
	}
	if !strings.Contains(logs.String(), "unknown_policy") {
		t.Errorf("the refusal is not in the log: %q", logs.String())
	}
}

func TestStoppedDaemonThenRestartedOnTheSameSocket(t *testing.T) {
	d := sluicetest.Start(t, "", sluicetest.Policies)
	c, logs := newClient(t, d.Socket)
	check(t, c, sluice.Check{Policy: "fixed", Key: "k"})
	d.Stop()
	for i := 0; i < 20; i++ {
		_, err := c.Check(context.Background(), sluice.Check{Policy: "fixed", Key: "k"})
		var u *sluice.UnavailableError
		if !errors.Is(err, sluice.ErrUnavailable) || !errors.As(err, &u) {
			t.Fatalf("stopped daemon: %v", err)
		}
	}
	if s := c.Stats(); s.Unavailable != 20 {
		t.Errorf("stats: %+v, want 20 unavailable", s)
	}
	// One burst of failures is one log line.
	if lines := strings.Count(logs.String(), "\n"); lines != 1 {
		t.Errorf("%d log lines for one burst, want 1: %q", lines, logs.String())
	}
	d.Restart(t)
	got := check(t, c, sluice.Check{Policy: "fixed", Key: "k"})
	if !got.Allowed || got.Remaining != 2 {
		t.Errorf("after restart: %+v", got)
	}
}

func TestFrozenDaemonTimesOut(t *testing.T) {
	d := sluicetest.Start(t, "", sluicetest.Policies)
	c, _ := newClient(t, d.Socket)
	fast, _ := newClientTimeout(t, d.Socket, 0) // the default, 50 ms
	check(t, c, sluice.Check{Policy: "fixed", Key: "k"})
	// SIGSTOP: the kernel still accepts connections and takes requests, nothing answers.
	d.Freeze(t)
	_, err := fast.Check(context.Background(), sluice.Check{Policy: "fixed", Key: "k"})
	var u *sluice.UnavailableError
	if !errors.As(err, &u) || u.Reason != "timeout" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("frozen daemon: %v", err)
	}
	d.Thaw(t)
	if got := check(t, c, sluice.Check{Policy: "fixed", Key: "other"}); !got.Allowed {
		t.Errorf("after thaw: %+v", got)
	}
}

func TestCancelledCallIsNeitherCountedNorLogged(t *testing.T) {
	d := sluicetest.Start(t, "", sluicetest.Policies)
	c, logs := newClient(t, d.Socket)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Check(ctx, sluice.Check{Policy: "fixed", Key: "k"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	if s := c.Stats(); s.Unavailable != 0 || logs.String() != "" {
		t.Errorf("a cancelled call was counted or logged: %+v %q", s, logs.String())
	}
}

func TestTCPListener(t *testing.T) {
	addr := sluicetest.FreeAddr(t)
	d := sluicetest.Start(t, "http = \""+addr+"\"", sluicetest.Policies)
	c, _ := newClient(t, "http://"+addr)
	if got := check(t, c, sluice.Check{Policy: "fixed", Key: "k"}); !got.Allowed || got.Remaining != 2 {
		t.Errorf("over TCP: %+v", got)
	}
	// The same counter answers on the socket.
	u, _ := newClient(t, "unix:"+d.Socket)
	if got := check(t, u, sluice.Check{Policy: "fixed", Key: "k"}); got.Remaining != 1 {
		t.Errorf("over the socket after TCP: %+v", got)
	}
}

// A server that is not sluiced (a proxy's error page, a wrong port) gives no decision.
func TestAnswersThatAreNotSluicedsAreUnavailability(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var chk struct {
			Key string `json:"key"`
		}
		_ = json.NewDecoder(r.Body).Decode(&chk)
		switch chk.Key {
		case "500":
			w.WriteHeader(500)
		case "garbage":
			_, _ = w.Write([]byte("not json"))
		case "overloaded":
			w.WriteHeader(503)
			_, _ = w.Write([]byte(`{"error":"overloaded"}`))
		default:
			w.WriteHeader(404)
			_, _ = w.Write([]byte("<html>not found</html>"))
		}
	}))
	defer srv.Close()
	c, _ := newClient(t, srv.URL)
	for _, key := range []string{"500", "garbage", "overloaded", "html"} {
		_, err := c.Check(context.Background(), sluice.Check{Policy: "p", Key: key})
		if !errors.Is(err, sluice.ErrUnavailable) {
			t.Errorf("key %s: %v, want ErrUnavailable", key, err)
		}
	}
}

func TestNewClientRefusesBadTargets(t *testing.T) {
	for _, target := range []string{"https://127.0.0.1:1", "unix:"} {
		if _, err := sluice.NewClient(sluice.ClientOptions{Target: target}); err == nil {
			t.Errorf("target %q accepted", target)
		}
	}
	if _, err := sluice.NewClient(sluice.ClientOptions{Timeout: -1}); err == nil {
		t.Errorf("negative timeout accepted")
	}
}
