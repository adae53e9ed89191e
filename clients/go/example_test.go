package sluice_test

// Examples for go doc, compiled (not run: they need a daemon). The README's whole apps are
// built and run by gin/snippets_test.go.

import (
	"context"
	"errors"
	"log"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"

	sluice "github.com/sluice-rs/sluice/clients/go"
)

func userID(r *http.Request) string { return r.Header.Get("X-User-Id") }

func ExampleMiddleware() {
	c, err := sluice.NewClient(sluice.ClientOptions{}) // $SLUICE_SOCKET, else /tmp/sluiced.sock; 50 ms
	if err != nil {
		log.Fatal(err)
	}
	limit := sluice.Middleware(c, sluice.Options{
		Policy:         "public",
		UserFunc:       userID, // key user:<id>, else ip:<address>
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
	})
	mux := http.NewServeMux()
	orders := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("orders")) })
	mux.Handle("/orders/", limit(orders))
	mux.Handle("/search", sluice.Middleware(c, sluice.Options{Policy: "search", Cost: 5, FailClosed: true})(orders))
}

func ExampleClient_Check() {
	c, err := sluice.NewClient(sluice.ClientOptions{Target: "/run/sluice/sluiced.sock"})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	d, err := c.Check(ctx, sluice.Check{Policy: "public", Key: "user:123", Cost: 1, Tier: "pro", Endpoint: "/orders"})
	switch {
	case errors.Is(err, sluice.ErrUnavailable): // unreachable, timeout, or an answer not sluiced's
	case err != nil: // *sluice.APIError: sluiced refused the check
	case d.Allowed: // d.Limit, d.Remaining, d.Reset, d.Degraded; d.Header: the headers to pass on
	default: // d.Status 429 (d.RetryAfter, d.Body) or 503 (a fail-closed policy)
	}
	_, _ = c.CheckBatch(ctx, []sluice.Check{{Policy: "public", Key: "user:123"}, {Policy: "exports", Key: "org:9", Cost: 10}})
}

// A gateway in front of an OpenAI-compatible upstream, under a usage policy of tokens:
// each request asks whether the user has any budget left, and once the answer (JSON, or a
// streamed text/event-stream) has gone through, its usage.total_tokens is charged in the
// background.
func ExampleOpenAIUsage() {
	c, err := sluice.NewClient(sluice.ClientOptions{})
	if err != nil {
		log.Fatal(err)
	}
	upstream, err := url.Parse("http://127.0.0.1:8000") // vLLM, llama.cpp, LiteLLM, ...
	if err != nil {
		log.Fatal(err)
	}
	limit := sluice.Middleware(c, sluice.Options{
		Policy:   "llm_tokens", // usage = true
		UserFunc: userID,
		Charge:   sluice.OpenAIUsage,
	})
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", limit(httputil.NewSingleHostReverseProxy(upstream))))
}

func ExampleClient_Charge() {
	c, err := sluice.NewClient(sluice.ClientOptions{})
	if err != nil {
		log.Fatal(err)
	}
	// After the response: what it used (a negative amount refunds).
	d, err := c.Charge(context.Background(), "llm_tokens", "user:42", 1830, "")
	if err == nil && !d.Allowed {
		log.Printf("user:42 is %d tokens in debt until %d", d.Debt, d.Reset)
	}
}
