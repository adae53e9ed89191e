// Package sluice is the Go client of sluiced, the sluice rate-limiter daemon, and its
// net/http middleware.
//
// It exists so that a Go service asks sluiced "may this key make this request?" without
// writing, by hand, the HTTP client over a Unix socket, the copy of sluiced's rate-limit
// headers, the 429 body, the timeout and the behaviour when the daemon is away: the code
// whose mistakes (headers only on denials, no Retry-After, an unbounded wait on a dead
// limiter) rate limiting in production keeps repeating.
//
// A Client speaks HTTP/1.1 to sluiced over its Unix socket (or TCP) through a bounded pool
// of keep-alive connections; every call is bounded by a timeout (50 ms by default).
// Middleware wraps an http.Handler; the sub-package sluice/gin (package sluicegin) does the
// same for gin.
//
// For usage policies (budgets of what requests used, such as LLM tokens), Client.Charge debits
// what a request used after its response, and the middlewares' Charge option meters each
// response as it is written (OpenAIUsage: an OpenAI-compatible upstream's tokens) and charges
// it in the background once the handler has returned, never delaying the response.
package sluice
