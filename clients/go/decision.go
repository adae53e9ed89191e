package sluice

// What sluiced answered, in the form an application and the middlewares use: the decision
// fields, the rate-limit headers to pass on, and the body bytes to pass on unchanged.

import (
	"encoding/json"
	"net/http"
	"net/textproto"
)

// HeaderNames are the headers sluiced sets on its answers that a service passes on to its own
// client, exactly as sluiced sent them.
var HeaderNames = []string{
	"X-RateLimit-Limit",
	"X-RateLimit-Remaining",
	"X-RateLimit-Reset",
	"RateLimit",
	"RateLimit-Policy",
	"Retry-After",
	"X-RateLimit-Degraded",
}

// canonicalHeaderNames are HeaderNames in the form http.Header keys take, computed once so
// that copying the headers costs no canonicalisation per request.
var canonicalHeaderNames = func() []string {
	out := make([]string, len(HeaderNames))
	for i, n := range HeaderNames {
		out[i] = textproto.CanonicalMIMEHeaderKey(n)
	}
	return out
}()

// Decision is sluiced's answer to one check.
type Decision struct {
	// Allowed is true when the request may go on (status 200).
	Allowed bool
	// Status is sluiced's HTTP status: 200 allowed, 429 denied, 503 a fail-closed policy
	// whose backend is down.
	Status int
	// Policy is the policy that decided.
	Policy string
	// Limit, Remaining: the quota and what is left of it.
	Limit     int64
	Remaining int64
	// Reset is the unix time (seconds) when the key is back to full.
	Reset int64
	// RetryAfter is the whole seconds until a request of this cost could pass; 0 when allowed.
	RetryAfter int64
	// DelayMs is how long a leaky_bucket policy asks the caller to wait; 0 otherwise.
	DelayMs int64
	// Debt is what a key of a usage policy owes beyond its limit (after charges that did
	// not fit); 0 otherwise.
	Debt int64
	// Degraded is true when sluiced's backend failed and a fail-open policy let the request
	// through.
	Degraded bool
	// Error is sluiced's error code on a denial or a 503 ("rate_limit_exceeded",
	// "backend_unavailable"), empty when allowed.
	Error string
	// Header holds the headers among HeaderNames that sluiced sent, to be copied onto the
	// service's answer.
	Header http.Header
	// Body is sluiced's body, unchanged (an application/problem+json document on a 429).
	// In a BatchDecision's Results it is that result's own JSON object.
	Body []byte
}

// BatchDecision is sluiced's answer to an all-or-nothing batch of checks.
type BatchDecision struct {
	// Allowed is true when every check passed (and so all of them consumed).
	Allowed bool
	// Status is sluiced's HTTP status (200, 429 or 503).
	Status int
	// Results holds one decision per check, in order; empty on a 503.
	Results []Decision
	// Header holds the headers of the most restrictive result.
	Header http.Header
	// Body is sluiced's body, unchanged.
	Body []byte
}

// wireDecision is one check's JSON answer as sluiced sends it.
type wireDecision struct {
	Allowed    bool   `json:"allowed"`
	Policy     string `json:"policy"`
	Limit      int64  `json:"limit"`
	Remaining  int64  `json:"remaining"`
	Reset      int64  `json:"reset"`
	RetryAfter int64  `json:"retry_after"`
	DelayMs    int64  `json:"delay_ms"`
	Debt       int64  `json:"debt"`
	Degraded   bool   `json:"degraded"`
	Error      string `json:"error"`
	Message    string `json:"message"`
}

func (w *wireDecision) decision(status int, header http.Header, body []byte) Decision {
	return Decision{
		Allowed:    w.Allowed && status == http.StatusOK,
		Status:     status,
		Policy:     w.Policy,
		Limit:      w.Limit,
		Remaining:  w.Remaining,
		Reset:      w.Reset,
		RetryAfter: w.RetryAfter,
		DelayMs:    w.DelayMs,
		Debt:       w.Debt,
		Degraded:   w.Degraded,
		Error:      w.Error,
		Header:     header,
		Body:       body,
	}
}

// wireBatch is a batch's JSON answer.
type wireBatch struct {
	Allowed bool              `json:"allowed"`
	Results []json.RawMessage `json:"results"`
}

// rateLimitHeaders picks, from sluiced's answer, the headers a service passes on.
func rateLimitHeaders(src http.Header) http.Header {
	out := make(http.Header, len(canonicalHeaderNames))
	for _, k := range canonicalHeaderNames {
		if v, ok := src[k]; ok {
			out[k] = v
		}
	}
	return out
}

// CopyHeaders sets on dst the rate-limit headers of d, replacing any of the same name.
func CopyHeaders(dst http.Header, d Decision) {
	for k, v := range d.Header {
		dst[k] = v
	}
}
