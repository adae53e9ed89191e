package sluice_test

// Examples for go doc, compiled (not run: they need a daemon). The README's whole apps are
// built and run by gin/snippets_test.go.

import (
	"context"
	"errors"
	"log"
	"net/http"
	"net/netip"

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
