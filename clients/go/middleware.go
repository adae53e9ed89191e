package sluice

// net/http middleware: one check per request, sluiced's headers on every answer, sluiced's
// 429 (or 503) passed on as it gave them, and fail open (or closed) when it gives nothing.

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Options configure one Middleware (so one route or group of routes).
type Options struct {
	// Policy is the sluiced policy to check. Required.
	Policy string
	// Key gives the rate-limit key of a request. Default: "user:"+UserFunc(r) when that is
	// set and non-empty, else "ip:"+ the client address (see TrustedProxies).
	Key func(r *http.Request) string
	// UserFunc gives the authenticated user's id, "" when none (net/http has no user).
	UserFunc func(r *http.Request) string
	// TrustedProxies: when the peer (r.RemoteAddr) is in one of these prefixes, the client
	// address is the right-most X-Forwarded-For entry not in them. Empty: the peer.
	TrustedProxies []netip.Prefix
	// Cost of each request (0: sluiced's default, 1); CostFunc, when set, wins.
	Cost     int64
	CostFunc func(r *http.Request) int64
	// Tier of each request ("" the policy's own limit); TierFunc, when set, wins.
	Tier     string
	TierFunc func(r *http.Request) string
	// Endpoint label for sluiced's metrics; EndpointFunc, when set, wins. Default: the
	// request path (net/http has no route pattern).
	Endpoint     string
	EndpointFunc func(r *http.Request) string
	// FailClosed answers 503 when sluiced gives no decision (unreachable, timeout, bad
	// answer, or a refused check). Default false: the request goes on without headers.
	FailClosed bool
	// Deny replaces the answer to a denied request. The rate-limit headers are already set
	// on w when it is called. Default: WriteDecision (429, sluiced's problem+json body).
	Deny func(w http.ResponseWriter, r *http.Request, d Decision)
	// Charge, for a usage policy, makes a Meter for each request the handler serves (allowed,
	// or let through by a failed check): the meter sees the body as it is written, and once
	// the handler has returned, its amount is charged to the request's key and tier in the
	// background (Client.ChargeInBackground), never delaying the response nor failing it.
	// OpenAIUsage charges an OpenAI-compatible upstream's tokens. nil (the default), or a nil
	// Meter: nothing is charged.
	Charge func(r *http.Request) Meter
}

// Middleware checks every request with sluiced before handing it to the next handler.
// It panics when opts.Policy is empty or client is nil (a programming error, found at start).
func Middleware(client *Client, opts Options) func(http.Handler) http.Handler {
	if client == nil {
		panic("sluice: Middleware needs a Client")
	}
	if opts.Policy == "" {
		panic("sluice: Middleware needs Options.Policy")
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			chk := opts.check(r)
			d, err := client.Check(r.Context(), chk)
			if err != nil {
				if opts.FailClosed {
					WriteUnavailable(w)
					return
				}
				serveMetered(client, opts.Charge, next, w, r, chk)
				return
			}
			CopyHeaders(w.Header(), d)
			switch {
			case d.Allowed:
				serveMetered(client, opts.Charge, next, w, r, chk)
			case d.Status == http.StatusTooManyRequests && opts.Deny != nil:
				opts.Deny(w, r, d)
			default:
				WriteDecision(w, d)
			}
		})
	}
}

func (o *Options) check(r *http.Request) Check {
	chk := Check{Policy: o.Policy, Cost: o.Cost, Tier: o.Tier, Endpoint: o.Endpoint}
	switch {
	case o.Key != nil:
		chk.Key = o.Key(r)
	default:
		chk.Key = o.defaultKey(r)
	}
	if o.CostFunc != nil {
		chk.Cost = o.CostFunc(r)
	}
	if o.TierFunc != nil {
		chk.Tier = o.TierFunc(r)
	}
	switch {
	case o.EndpointFunc != nil:
		chk.Endpoint = o.EndpointFunc(r)
	case chk.Endpoint == "":
		chk.Endpoint = r.URL.Path
	}
	return chk
}

func (o *Options) defaultKey(r *http.Request) string {
	if o.UserFunc != nil {
		if id := o.UserFunc(r); id != "" {
			return "user:" + id
		}
	}
	return "ip:" + ClientAddr(r, o.TrustedProxies)
}

// ClientAddr is the address of the client that sent r: the host of r.RemoteAddr, or, when
// that peer is one of the trusted proxies, the right-most X-Forwarded-For entry that is not.
// Entries to the left of the first untrusted one were written by whoever the client is, and
// are never believed.
func ClientAddr(r *http.Request, trusted []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if len(trusted) == 0 {
		return host
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || !inAny(peer.Unmap(), trusted) {
		return host
	}
	addr := peer.Unmap()
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		entries := strings.Split(hops[i], ",")
		for j := len(entries) - 1; j >= 0; j-- {
			hop, err := netip.ParseAddr(strings.TrimSpace(entries[j]))
			if err != nil {
				// Not an address: what a trusted proxy appended is always one, so the
				// chain is broken here; the last trusted hop is the best answer.
				return addr.String()
			}
			addr = hop.Unmap()
			if !inAny(addr, trusted) {
				return addr.String()
			}
		}
	}
	return addr.String()
}

func inAny(a netip.Addr, prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// WriteDecision answers a request that sluiced did not allow, as sluiced answered: its
// headers, its status (429, or 503 from a fail-closed policy) and its body, with
// Content-Type application/problem+json on a 429 and application/json on a 503.
func WriteDecision(w http.ResponseWriter, d Decision) {
	CopyHeaders(w.Header(), d)
	status := d.Status
	ctype := "application/json"
	if status == http.StatusTooManyRequests {
		ctype = "application/problem+json"
	}
	if status == 0 || d.Allowed {
		// Not a denial (a zero Decision, say): deny without a body rather than say "200".
		status = http.StatusTooManyRequests
	}
	w.Header().Set("Content-Type", ctype)
	w.WriteHeader(status)
	_, _ = w.Write(d.Body)
}

// unavailableBody is the fail-closed answer when sluiced gives no decision.
var unavailableBody = []byte(`{"error":"rate_limiter_unavailable","message":"The rate limiter could not be reached; retry shortly."}`)

// WriteUnavailable is the fail-closed answer: 503, Retry-After: 1, and an application/json
// body {"error":"rate_limiter_unavailable","message":"..."}.
func WriteUnavailable(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(unavailableBody)
}
