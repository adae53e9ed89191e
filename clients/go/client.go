package sluice

// The client: one HTTP/1.1 request per check over a bounded pool of keep-alive connections
// to sluiced, each call bounded by a timeout, sluiced's answer turned into a Decision or a
// typed error.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// Defaults of ClientOptions.
const (
	DefaultSocket   = "/tmp/sluiced.sock"
	DefaultTimeout  = 50 * time.Millisecond
	DefaultMaxConns = 32
	// maxBody bounds what is read of one answer: a batch of 64 results is about 30 KiB.
	maxBody = 1 << 20
	// logInterval is the least time between two log lines about failed checks.
	logInterval = 10 * time.Second
	checkPath   = "/v1/check"
)

// ClientOptions configure a Client. The zero value is usable: the socket named by
// SLUICE_SOCKET (else /tmp/sluiced.sock), 50 ms per call, 32 connections.
type ClientOptions struct {
	// Target is where sluiced listens: a Unix socket path ("/run/sluice/sluiced.sock",
	// or "unix:/run/sluice/sluiced.sock") or a TCP base URL ("http://127.0.0.1:8080").
	// Empty: $SLUICE_SOCKET, else /tmp/sluiced.sock.
	Target string
	// Timeout bounds every call (connecting, sending, the whole answer). Default 50 ms.
	Timeout time.Duration
	// MaxConns bounds the connections to sluiced, idle or busy; a call that finds them all
	// busy waits for one within its timeout. Default 32.
	MaxConns int
	// Logger receives one line per burst of failed checks, and one per burst of failed
	// charges (each at most one per 10 s).
	// Default: log.Default().
	Logger *log.Logger
}

// Stats are a Client's counters since it was made.
type Stats struct {
	// Checks counts calls (a batch counts once).
	Checks uint64
	// Unavailable counts calls that failed with ErrUnavailable (each one a fail-open or
	// fail-closed request in the middlewares).
	Unavailable uint64
	// Refused counts calls sluiced refused with an APIError.
	Refused uint64
	// Charges counts charges sluiced answered (Charge, and the middlewares' charges).
	Charges uint64
	// ChargeFailures counts charges that were lost: sluiced unreachable, timed out or
	// refusing the charge, or too many charges already in flight.
	ChargeFailures uint64
}

// Client asks sluiced for decisions. It is safe for concurrent use; make one per process
// and share it.
type Client struct {
	base      string // the URL before /v1/check
	transport *http.Transport
	timeout   time.Duration
	log       *burstLog
	chargeLog *burstLog
	// chargeSlots bounds the charges sent in the background at once.
	chargeSlots chan struct{}

	checks         atomic.Uint64
	unavailable    atomic.Uint64
	refused        atomic.Uint64
	charges        atomic.Uint64
	chargeFailures atomic.Uint64
}

// NewClient makes a Client. It does not connect: the first call does.
func NewClient(opts ClientOptions) (*Client, error) {
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("sluice: ClientOptions.Timeout is negative (%v)", opts.Timeout)
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxConns < 0 {
		return nil, fmt.Errorf("sluice: ClientOptions.MaxConns is negative (%d)", opts.MaxConns)
	}
	if opts.MaxConns == 0 {
		opts.MaxConns = DefaultMaxConns
	}
	if opts.Logger == nil {
		opts.Logger = log.Default()
	}
	target := opts.Target
	if target == "" {
		target = os.Getenv("SLUICE_SOCKET")
	}
	if target == "" {
		target = DefaultSocket
	}
	// Proxy stays nil: a check must never go through an HTTP_PROXY of the environment.
	tr := &http.Transport{
		MaxIdleConns:        opts.MaxConns,
		MaxIdleConnsPerHost: opts.MaxConns,
		MaxConnsPerHost:     opts.MaxConns,
		// Below sluiced's default idle_timeout (120 s), so the client drops an idle
		// connection before the daemon closes it under a request.
		IdleConnTimeout:    90 * time.Second,
		DisableCompression: true,
	}
	var base string
	switch {
	case strings.HasPrefix(target, "http://"):
		base = strings.TrimSuffix(target, "/")
		dialer := &net.Dialer{}
		tr.DialContext = dialer.DialContext
	case strings.HasPrefix(target, "https://"):
		return nil, fmt.Errorf("sluice: target %q: sluiced speaks plain HTTP; use a Unix socket or http://", target)
	default:
		path := strings.TrimPrefix(strings.TrimPrefix(target, "unix://"), "unix:")
		if path == "" {
			return nil, fmt.Errorf("sluice: target %q names no socket path", target)
		}
		// The host part is a placeholder: every connection goes to the socket.
		base = "http://sluiced"
		dialer := &net.Dialer{}
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", path)
		}
	}
	return &Client{
		base:        base,
		transport:   tr,
		timeout:     opts.Timeout,
		log:         &burstLog{logger: opts.Logger, interval: logInterval, what: "checks"},
		chargeLog:   &burstLog{logger: opts.Logger, interval: logInterval, what: "charges"},
		chargeSlots: make(chan struct{}, maxChargesInFlight),
	}, nil
}

// Close drops the idle connections. Calls after Close still work (they open new ones).
func (c *Client) Close() { c.transport.CloseIdleConnections() }

// Stats reads the counters.
func (c *Client) Stats() Stats {
	return Stats{
		Checks:         c.checks.Load(),
		Unavailable:    c.unavailable.Load(),
		Refused:        c.refused.Load(),
		Charges:        c.charges.Load(),
		ChargeFailures: c.chargeFailures.Load(),
	}
}

// Check is one question to sluiced.
type Check struct {
	Policy string
	Key    string
	// Cost is what the request consumes; 0 means sluiced's default, 1. Use Peek to ask
	// without consuming.
	Cost int64
	// Peek sends cost 0: the answer says whether a request would pass, consuming nothing.
	Peek bool
	// Tier names the plan tier whose limit applies; empty for the policy's own limit.
	Tier string
	// Endpoint is a metrics label only.
	Endpoint string
}

// wireCheck is a Check as JSON.
type wireCheck struct {
	Policy   string `json:"policy"`
	Key      string `json:"key"`
	Cost     *int64 `json:"cost,omitempty"`
	Tier     string `json:"tier,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
}

var zeroCost int64

func (k *Check) wire() wireCheck {
	w := wireCheck{Policy: k.Policy, Key: k.Key, Tier: k.Tier, Endpoint: k.Endpoint}
	switch {
	case k.Peek:
		w.Cost = &zeroCost
	case k.Cost != 0:
		cost := k.Cost
		w.Cost = &cost
	}
	return w
}

// Check asks sluiced about one request. A denial is not an error: it is a Decision with
// Allowed false and Status 429 (or 503 from a fail-closed policy whose backend is down).
// The error is an *UnavailableError (errors.Is(err, ErrUnavailable)) or an *APIError.
func (c *Client) Check(ctx context.Context, chk Check) (Decision, error) {
	body, err := json.Marshal(chk.wire())
	if err != nil {
		return Decision{}, c.failed(&UnavailableError{Reason: "encoding the check", Err: err})
	}
	c.checks.Add(1)
	status, header, raw, err := c.post(ctx, checkPath, body)
	if err != nil {
		return Decision{}, c.failed(err)
	}
	var w wireDecision
	if err := json.Unmarshal(raw, &w); err != nil {
		return Decision{}, c.failed(&UnavailableError{Reason: "bad answer", Status: status, Err: err})
	}
	return w.decision(status, rateLimitHeaders(header), raw), nil
}

// CheckBatch asks about several checks at once, all or nothing: if any is denied none of
// them consumes (at most 64 checks; sluiced refuses more with an APIError).
func (c *Client) CheckBatch(ctx context.Context, checks []Check) (BatchDecision, error) {
	wire := struct {
		Checks []wireCheck `json:"checks"`
	}{Checks: make([]wireCheck, len(checks))}
	for i := range checks {
		wire.Checks[i] = checks[i].wire()
	}
	body, err := json.Marshal(wire)
	if err != nil {
		return BatchDecision{}, c.failed(&UnavailableError{Reason: "encoding the checks", Err: err})
	}
	c.checks.Add(1)
	status, header, raw, err := c.post(ctx, checkPath, body)
	if err != nil {
		return BatchDecision{}, c.failed(err)
	}
	out := BatchDecision{Status: status, Header: rateLimitHeaders(header), Body: raw}
	if status == http.StatusServiceUnavailable {
		return out, nil
	}
	var w wireBatch
	if err := json.Unmarshal(raw, &w); err != nil {
		return BatchDecision{}, c.failed(&UnavailableError{Reason: "bad answer", Status: status, Err: err})
	}
	out.Allowed = w.Allowed && status == http.StatusOK
	out.Results = make([]Decision, len(w.Results))
	for i, r := range w.Results {
		var d wireDecision
		if err := json.Unmarshal(r, &d); err != nil {
			return BatchDecision{}, c.failed(&UnavailableError{Reason: "bad answer", Status: status, Err: err})
		}
		out.Results[i] = d.decision(http.StatusOK, nil, r)
		if !d.Allowed {
			out.Results[i].Status = http.StatusTooManyRequests
		}
	}
	return out, nil
}

// failed counts and logs a failed call, and gives its error back. A call its caller cancelled
// (the service's own client went away) says nothing about sluiced: neither counted nor logged.
func (c *Client) failed(err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	var api *APIError
	if errors.As(err, &api) {
		c.refused.Add(1)
	} else {
		c.unavailable.Add(1)
	}
	c.log.failure(err)
	return err
}

// attempt records, for one try, whether it ran on a pooled connection and whether any byte
// of the answer came back; the transport calls these hooks from its own goroutines.
type attempt struct {
	reused    atomic.Bool
	firstByte atomic.Bool
}

// post sends one body to path (checkPath or chargePath) and gives back a 200, 429 or 503
// answer from sluiced. A failure on a pooled connection before any byte of answer (the daemon
// restarted and the connection is stale) is retried once on a fresh one.
func (c *Client) post(ctx context.Context, path string, body []byte) (int, http.Header, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	for try := 0; ; try++ {
		var a attempt
		trace := &httptrace.ClientTrace{
			GotConn:              func(i httptrace.GotConnInfo) { a.reused.Store(i.Reused) },
			GotFirstResponseByte: func() { a.firstByte.Store(true) },
		}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace),
			http.MethodPost, c.base+path, bytes.NewReader(body))
		if err != nil {
			return 0, nil, nil, &UnavailableError{Reason: "building the request", Err: err}
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.transport.RoundTrip(req)
		if err != nil {
			if try == 0 && a.reused.Load() && !a.firstByte.Load() && ctx.Err() == nil {
				continue
			}
			return 0, nil, nil, transportError(ctx, err)
		}
		return readAnswer(ctx, resp)
	}
}

// readAnswer reads a bounded body and sorts the status.
func readAnswer(ctx context.Context, resp *http.Response) (int, http.Header, []byte, error) {
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return 0, nil, nil, transportError(ctx, err)
	}
	if len(raw) > maxBody {
		return 0, nil, nil, &UnavailableError{Reason: "bad answer: body over 1 MiB", Status: resp.StatusCode}
	}
	switch resp.StatusCode {
	case http.StatusOK, http.StatusTooManyRequests:
		return resp.StatusCode, resp.Header, raw, nil
	case http.StatusServiceUnavailable:
		// sluiced's own 503 for a fail-closed policy is a decision; its other 503
		// ("overloaded": connection limit reached) means it could not decide.
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(raw, &e) == nil && e.Error == "backend_unavailable" {
			return resp.StatusCode, resp.Header, raw, nil
		}
		return 0, nil, nil, &UnavailableError{Reason: "bad answer: " + quoteCode(e.Error), Status: resp.StatusCode}
	case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge:
		var e struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		}
		if json.Unmarshal(raw, &e) != nil || e.Error == "" {
			return 0, nil, nil, &UnavailableError{Reason: "bad answer: not sluiced's error document", Status: resp.StatusCode}
		}
		return 0, nil, nil, &APIError{Status: resp.StatusCode, Code: e.Error, Message: e.Message}
	default:
		return 0, nil, nil, &UnavailableError{Reason: "bad answer", Status: resp.StatusCode}
	}
}

func quoteCode(code string) string {
	if code == "" {
		return "unexpected 503"
	}
	if len(code) > 64 {
		code = code[:64]
	}
	return fmt.Sprintf("%q", code)
}

// transportError names a timeout as one, keeping the cause.
func transportError(ctx context.Context, err error) error {
	if ctx.Err() == context.DeadlineExceeded {
		return &UnavailableError{Reason: "timeout", Err: context.DeadlineExceeded}
	}
	return &UnavailableError{Reason: "transport", Err: err}
}
