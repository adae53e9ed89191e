// Package sluicegin is sluice's middleware for gin: one line,
//
//	r.Use(sluicegin.Middleware(c, sluicegin.Options{Policy: "public"}))
//
// and every request is checked with sluiced, with the behaviour of sluice.Middleware (rate-limit
// headers on every answer, sluiced's 429 on a denial, fail open by default) and gin's own
// notions of the user (gin.BasicAuth's gin.AuthUserKey), the client address (c.ClientIP(),
// behind gin's trusted proxies) and the route (c.FullPath()).
package sluicegin

import (
	"net/http"

	"github.com/gin-gonic/gin"

	sluice "github.com/sluice-rs/sluice/clients/go"
)

// Options configure one Middleware (so one engine, group or route).
type Options struct {
	// Policy is the sluiced policy to check. Required.
	Policy string
	// Key gives the rate-limit key of a request. Default: "user:"+ the user gin.BasicAuth
	// set (c.GetString(gin.AuthUserKey)) when non-empty, else "ip:"+c.ClientIP().
	Key func(c *gin.Context) string
	// Cost of each request (0: sluiced's default, 1); CostFunc, when set, wins.
	Cost     int64
	CostFunc func(c *gin.Context) int64
	// Tier of each request ("" the policy's own limit); TierFunc, when set, wins.
	Tier     string
	TierFunc func(c *gin.Context) string
	// Endpoint label for sluiced's metrics; EndpointFunc, when set, wins. Default: the
	// route pattern (c.FullPath(), e.g. "/items/:id"), else the path when no route matched.
	Endpoint     string
	EndpointFunc func(c *gin.Context) string
	// FailClosed answers 503 when sluiced gives no decision. Default false: fail open.
	FailClosed bool
	// Deny replaces the answer to a denied request (the rate-limit headers are already set;
	// the chain is aborted after it). Default: sluiced's 429 problem+json body.
	Deny func(c *gin.Context, d sluice.Decision)
	// Charge, for a usage policy, makes a sluice.Meter for each request the chain serves
	// (allowed, or let through by a failed check): the meter sees the body as it is written,
	// and once the chain has returned, its amount is charged to the request's key and tier in
	// the background, never delaying the response nor failing it (sluice.OpenAIUsage charges
	// an OpenAI-compatible upstream's tokens; use it as func(c *gin.Context) sluice.Meter {
	// return sluice.OpenAIUsage(c.Request) }). nil, or a nil Meter: nothing is charged.
	Charge func(c *gin.Context) sluice.Meter
}

// Middleware checks every request with sluiced before the rest of the chain runs.
// It panics when opts.Policy is empty or client is nil (a programming error, found at start).
func Middleware(client *sluice.Client, opts Options) gin.HandlerFunc {
	if client == nil {
		panic("sluicegin: Middleware needs a Client")
	}
	if opts.Policy == "" {
		panic("sluicegin: Middleware needs Options.Policy")
	}
	return func(c *gin.Context) {
		chk := opts.check(c)
		d, err := client.Check(c.Request.Context(), chk)
		if err != nil {
			if opts.FailClosed {
				sluice.WriteUnavailable(c.Writer)
				c.Abort()
				return
			}
			nextMetered(c, client, opts.Charge, chk)
			return
		}
		sluice.CopyHeaders(c.Writer.Header(), d)
		switch {
		case d.Allowed:
			nextMetered(c, client, opts.Charge, chk)
			return
		case d.Status == http.StatusTooManyRequests && opts.Deny != nil:
			opts.Deny(c, d)
		default:
			sluice.WriteDecision(c.Writer, d)
		}
		c.Abort()
	}
}

func (o *Options) check(c *gin.Context) sluice.Check {
	chk := sluice.Check{Policy: o.Policy, Cost: o.Cost, Tier: o.Tier, Endpoint: o.Endpoint}
	if o.Key != nil {
		chk.Key = o.Key(c)
	} else if user := c.GetString(gin.AuthUserKey); user != "" {
		chk.Key = "user:" + user
	} else {
		chk.Key = "ip:" + c.ClientIP()
	}
	if o.CostFunc != nil {
		chk.Cost = o.CostFunc(c)
	}
	if o.TierFunc != nil {
		chk.Tier = o.TierFunc(c)
	}
	switch {
	case o.EndpointFunc != nil:
		chk.Endpoint = o.EndpointFunc(c)
	case chk.Endpoint != "":
	case c.FullPath() != "":
		chk.Endpoint = c.FullPath()
	default:
		chk.Endpoint = c.Request.URL.Path
	}
	return chk
}

// nextMetered runs the rest of the chain, and when charge gives a meter for c, shows it the
// response and charges its amount to chk's policy, key and tier once the chain has returned.
// Without a meter the chain runs after this middleware returns, as gin does by default.
func nextMetered(c *gin.Context, client *sluice.Client, charge func(*gin.Context) sluice.Meter, chk sluice.Check) {
	var m sluice.Meter
	if charge != nil {
		m = charge(c)
	}
	if m == nil {
		return
	}
	w := &meteredWriter{ResponseWriter: c.Writer, meter: m}
	c.Writer = w
	c.Next()
	c.Writer = w.ResponseWriter
	// The context is reused once this returns: the charge takes copies.
	client.ChargeInBackground(chk.Policy, chk.Key, chk.Tier, m, w.Status(), w.Header().Clone())
}

// meteredWriter passes gin's response through unchanged, showing its body to a meter.
type meteredWriter struct {
	gin.ResponseWriter
	meter sluice.Meter
}

func (w *meteredWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	if n > 0 {
		_, _ = w.meter.Write(p[:n])
	}
	return n, err
}

func (w *meteredWriter) WriteString(s string) (int, error) {
	n, err := w.ResponseWriter.WriteString(s)
	if n > 0 {
		_, _ = w.meter.Write([]byte(s[:n]))
	}
	return n, err
}
