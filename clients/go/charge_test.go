package sluice_test

// Charges: the client's Charge against a real sluiced, and the net/http middleware charging
// what an OpenAI-compatible upstream reported, after the response and without delaying it.

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	sluice "github.com/sluice-rs/sluice/clients/go"
	"github.com/sluice-rs/sluice/clients/go/internal/sluicetest"
)

func TestChargeDebitsIntoDebtAndRefunds(t *testing.T) {
	d := sluicetest.Start(t, "", sluicetest.UsagePolicies)
	c, _ := newClient(t, d.Socket)
	ctx := context.Background()
	want := []struct {
		remaining, debt int64
		allowed         bool
	}{{60, 0, true}, {20, 0, true}, {0, 20, false}}
	for i, w := range want {
		got, err := c.Charge(ctx, "tokens", "user:1", 40, "")
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != 200 || got.Remaining != w.remaining || got.Debt != w.debt || got.Allowed != w.allowed {
			t.Errorf("charge %d: %+v, want remaining %d debt %d allowed %v", i+1, got, w.remaining, w.debt, w.allowed)
		}
	}
	// The key in debt is denied; a refund brings it back.
	if got := check(t, c, sluice.Check{Policy: "tokens", Key: "user:1"}); got.Allowed || got.Debt != 20 {
		t.Errorf("ask in debt: %+v", got)
	}
	if got, err := c.Charge(ctx, "tokens", "user:1", -30, ""); err != nil || !got.Allowed || got.Remaining != 10 || got.Debt != 0 {
		t.Errorf("refund of 30: %+v %v", got, err)
	}
	// A policy that is not a usage policy refuses charges, naming why.
	_, err := c.Charge(ctx, "plain", "user:1", 40, "")
	var api *sluice.APIError
	if !errors.As(err, &api) || api.Status != 400 || !strings.Contains(api.Message, "usage") {
		t.Errorf("charge to a plain policy: %v", err)
	}
	if s := c.Stats(); s.Charges != 4 || s.ChargeFailures != 1 {
		t.Errorf("stats %+v, want 4 charges and 1 failed", s)
	}
}

// gateway is an app that forwards /json and /sse to the upstream behind the middleware,
// keyed on the X-User header, charging the upstream's tokens.
func gateway(t *testing.T, c *sluice.Client, up *sluicetest.Upstream) string {
	t.Helper()
	target, err := url.Parse(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	limit := sluice.Middleware(c, sluice.Options{
		Policy: "tokens",
		Key:    func(r *http.Request) string { return "user:" + r.Header.Get("X-User") },
		Charge: sluice.OpenAIUsage,
	})
	srv := httptest.NewServer(limit(httputil.NewSingleHostReverseProxy(target)))
	t.Cleanup(srv.Close)
	return srv.URL
}

// fetcher asks the app at base with X-User.
func fetcher(t *testing.T, base string) sluicetest.Fetch {
	return func(path, user string) (int, http.Header, string) {
		a := get(t, base+path, "X-User", user)
		return a.status, a.header, string(a.body)
	}
}

func TestMiddlewareChargesTheUpstreamsTokens(t *testing.T) {
	d := sluicetest.Start(t, "", sluicetest.UsagePolicies)
	up := sluicetest.StartUpstream(t)
	for _, tc := range []struct{ path, body string }{
		{"/json", sluicetest.JSONBody},
		{"/sse", strings.Join(sluicetest.SSEBody, "")},
	} {
		t.Run(tc.path, func(t *testing.T) {
			c, _ := newClient(t, d.Socket)
			app := gateway(t, c, up)
			user := strings.TrimPrefix(tc.path, "/")
			sluicetest.SpendBudget(t, c, fetcher(t, app), tc.path, user, tc.body)
			if got := check(t, c, sluice.Check{Policy: "tokens", Key: "user:" + user}); got.Debt != 20 {
				t.Errorf("debt %d after 120 tokens of 100", got.Debt)
			}
		})
	}
}

func TestMiddlewareChargeDoesNotDelayTheResponse(t *testing.T) {
	d := sluicetest.Start(t, "", sluicetest.UsagePolicies)
	up := sluicetest.StartUpstream(t)
	c, _ := newClient(t, d.Socket)
	app := gateway(t, c, up)
	sluicetest.AnswerBeforeCharge(t, d, up, c, fetcher(t, app), "/sse", "held", strings.Join(sluicetest.SSEBody, ""))
	if got := check(t, c, sluice.Check{Policy: "tokens", Key: "user:held"}); got.Remaining != 100-sluicetest.Tokens {
		t.Errorf("remaining %d after the charge", got.Remaining)
	}
}

func TestMiddlewareWithSluicedStoppedServesAndCountsTheLostCharge(t *testing.T) {
	d := sluicetest.Start(t, "", sluicetest.UsagePolicies)
	up := sluicetest.StartUpstream(t)
	c, logs := newClient(t, d.Socket)
	app := gateway(t, c, up)
	d.Stop()
	a := get(t, app+"/json", "X-User", "u")
	if a.status != 200 || string(a.body) != sluicetest.JSONBody {
		t.Fatalf("answer with sluiced stopped: %d %q", a.status, a.body)
	}
	sluicetest.WaitCharges(t, c, 0, 1)
	if s := c.Stats(); s.Unavailable != 1 {
		t.Errorf("stats %+v, want the check counted unavailable", s)
	}
	if !strings.Contains(logs.String(), "failed charges") {
		t.Errorf("the lost charge was not logged: %q", logs.String())
	}
}

func TestOpenAIUsage(t *testing.T) {
	sse := strings.Join(sluicetest.SSEBody, "")
	big := `{"usage":{"total_tokens":7},"pad":"` + strings.Repeat("x", 1<<20) + `"}`
	cases := []struct {
		name, body string
		want       int64
		ok         bool
	}{
		{"json", sluicetest.JSONBody, 40, true},
		{"json after whitespace", "\n  " + sluicetest.JSONBody, 40, true},
		{"json without usage", `{"choices":[]}`, 0, false},
		{"json cut short", sluicetest.JSONBody[:50], 0, false},
		{"json over 1 MiB", big, 0, false},
		{"sse", sse, 40, true},
		{"sse with CRLF", strings.ReplaceAll(sse, "\n", "\r\n"), 40, true},
		{"sse ending without an empty line", "data: {\"usage\":{\"total_tokens\":9}}", 9, true},
		{"sse, the last usage wins", "data: {\"usage\":{\"total_tokens\":5}}\n\ndata: {\"usage\":{\"total_tokens\":6}}\n\n", 6, true},
		{"sse data on two lines", "data: {\"usage\":\ndata: {\"total_tokens\":3}}\n\n", 3, true},
		{"sse without usage", ": keep-alive\n\ndata: {\"choices\":[]}\n\ndata: [DONE]\n\n", 0, false},
	}
	for _, tc := range cases {
		for _, step := range []int{len(tc.body) + 1, 7, 1} {
			m := sluice.OpenAIUsage(nil)
			for rest := tc.body; rest != ""; {
				n := step
				if n > len(rest) {
					n = len(rest)
				}
				_, _ = m.Write([]byte(rest[:n]))
				rest = rest[n:]
			}
			got, ok := m.Amount(200, http.Header{})
			if got != tc.want || ok != tc.ok {
				t.Errorf("%s in pieces of %d: %d %v, want %d %v", tc.name, step, got, ok, tc.want, tc.ok)
			}
		}
	}
}

// BenchmarkOpenAIUsageStream: what metering costs a streamed answer of 200 token deltas and
// a usage chunk (go test -bench OpenAIUsage -run '^$').
func BenchmarkOpenAIUsageStream(b *testing.B) {
	delta := []byte(`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok"}}]}` + "\n\n")
	last := []byte(sluicetest.SSEBody[2] + sluicetest.SSEBody[3])
	b.SetBytes(int64(200*len(delta) + len(last)))
	for i := 0; i < b.N; i++ {
		m := sluice.OpenAIUsage(nil)
		for j := 0; j < 200; j++ {
			_, _ = m.Write(delta)
		}
		_, _ = m.Write(last)
		if n, ok := m.Amount(200, nil); !ok || n != sluicetest.Tokens {
			b.Fatalf("amount %d %v", n, ok)
		}
	}
}
