package sluicegin_test

// The gin middleware charging what an OpenAI-compatible upstream reported (JSON and
// server-sent events), after the response and without delaying it, against a real sluiced.

import (
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	sluice "github.com/sluice-rs/sluice/clients/go"
	sluicegin "github.com/sluice-rs/sluice/clients/go/gin"
	"github.com/sluice-rs/sluice/clients/go/internal/sluicetest"
)

// gateway is a gin app forwarding every path to the upstream, keyed on X-User, charging the
// upstream's tokens.
func gateway(t *testing.T, c *sluice.Client, up *sluicetest.Upstream) string {
	t.Helper()
	target, err := url.Parse(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	r := gin.New()
	r.Use(sluicegin.Middleware(c, sluicegin.Options{
		Policy: "tokens",
		Key:    func(c *gin.Context) string { return "user:" + c.GetHeader("X-User") },
		Charge: func(c *gin.Context) sluice.Meter { return sluice.OpenAIUsage(c.Request) },
	}))
	r.Any("/*path", gin.WrapH(httputil.NewSingleHostReverseProxy(target)))
	return serve(t, r)
}

func getAs(t *testing.T, url, user string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-User", user)
	return do(t, req)
}

// fetcher asks the app at base with X-User.
func fetcher(t *testing.T, base string) sluicetest.Fetch {
	return func(path, user string) (int, http.Header, string) {
		a := getAs(t, base+path, user)
		return a.status, a.header, string(a.body)
	}
}

func TestChargesTheUpstreamsTokens(t *testing.T) {
	d := sluicetest.Start(t, "", sluicetest.UsagePolicies)
	up := sluicetest.StartUpstream(t)
	for _, tc := range []struct{ path, body string }{
		{"/json", sluicetest.JSONBody},
		{"/sse", strings.Join(sluicetest.SSEBody, "")},
	} {
		t.Run(tc.path, func(t *testing.T) {
			c := client(t, d)
			app := gateway(t, c, up)
			sluicetest.SpendBudget(t, c, fetcher(t, app), tc.path, strings.TrimPrefix(tc.path, "/"), tc.body)
		})
	}
}

func TestChargeDoesNotDelayTheResponse(t *testing.T) {
	d := sluicetest.Start(t, "", sluicetest.UsagePolicies)
	up := sluicetest.StartUpstream(t)
	c := client(t, d)
	app := gateway(t, c, up)
	sluicetest.AnswerBeforeCharge(t, d, up, c, fetcher(t, app), "/json", "held", sluicetest.JSONBody)
}

func TestSluicedStoppedServesAndCountsTheLostCharge(t *testing.T) {
	d := sluicetest.Start(t, "", sluicetest.UsagePolicies)
	up := sluicetest.StartUpstream(t)
	var logs strings.Builder
	c, err := sluice.NewClient(sluice.ClientOptions{Target: d.Socket, Timeout: 5 * time.Second, Logger: log.New(&logs, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	app := gateway(t, c, up)
	d.Stop()
	a := getAs(t, app+"/sse", "u")
	if a.status != 200 || string(a.body) != strings.Join(sluicetest.SSEBody, "") {
		t.Fatalf("answer with sluiced stopped: %d %q", a.status, a.body)
	}
	sluicetest.WaitCharges(t, c, 0, 1)
	if !strings.Contains(logs.String(), "failed charges") {
		t.Errorf("the lost charge was not logged: %q", logs.String())
	}
}
