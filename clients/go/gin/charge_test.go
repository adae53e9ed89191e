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
			user := strings.TrimPrefix(tc.path, "/")
			// 100 tokens, 40 an answer: the third passes (20 left) and leaves the key in debt.
			for i := 1; i <= 3; i++ {
				a := getAs(t, app+tc.path, user)
				if a.status != 200 || string(a.body) != tc.body {
					t.Fatalf("request %d: %d %q", i, a.status, a.body)
				}
				sluicetest.WaitCharges(t, c, uint64(i), 0)
			}
			if a := getAs(t, app+tc.path, user); a.status != 429 || a.header.Get("Retry-After") == "" {
				t.Errorf("request 4: %d %v", a.status, a.header)
			}
		})
	}
}

func TestChargeDoesNotDelayTheResponse(t *testing.T) {
	d := sluicetest.Start(t, "", sluicetest.UsagePolicies)
	up := sluicetest.StartUpstream(t)
	c := client(t, d)
	app := gateway(t, c, up)
	entered, release := up.Hold()
	done := make(chan answer, 1)
	go func() { done <- getAs(t, app+"/json", "held") }()
	// The check is answered (the request reached the upstream); then sluiced stops answering.
	<-entered
	d.Freeze(t)
	release()
	a := <-done
	if a.status != 200 || string(a.body) != sluicetest.JSONBody {
		t.Fatalf("answer: %d %q", a.status, a.body)
	}
	if s := c.Stats(); s.Charges != 0 || s.ChargeFailures != 0 {
		t.Fatalf("the charge ended before the answer did: %+v", s)
	}
	d.Thaw(t)
	sluicetest.WaitCharges(t, c, 1, 0)
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
