package sluice

// Charges: what a request used, debited to a usage policy after its response
// (POST /v1/charge), and the background sender the middlewares use, so that a charge never
// delays a response nor turns into an error for the service's own client.

import (
	"context"
	"encoding/json"
	"net/http"
)

const (
	chargePath = "/v1/charge"
	// maxChargesInFlight bounds the charges sent in the background at once; past it a charge
	// is dropped and counted as failed rather than piling up goroutines behind a slow daemon.
	maxChargesInFlight = 1024
)

// wireCharge is a charge as JSON.
type wireCharge struct {
	Policy string `json:"policy"`
	Key    string `json:"key"`
	Tier   string `json:"tier,omitempty"`
	Amount int64  `json:"amount"`
}

// Charge debits amount (what a request used: LLM tokens, bytes; negative refunds) to key of
// the usage policy (`usage = true`) policy, in tier ("" for the policy's own limits). sluiced
// always debits, into debt when the key has less left, and answers with the body of a check:
// the Decision's Allowed says whether the key still has room for a request, Debt what it
// owes beyond its limit. The error is an *UnavailableError or an *APIError (a policy that is
// not a usage policy: 400 bad_request); failed charges are counted in Stats.ChargeFailures
// and logged once per burst.
func (c *Client) Charge(ctx context.Context, policy, key string, amount int64, tier string) (Decision, error) {
	body, err := json.Marshal(wireCharge{Policy: policy, Key: key, Tier: tier, Amount: amount})
	if err != nil {
		return Decision{}, c.chargeFailed(&UnavailableError{Reason: "encoding the charge", Err: err})
	}
	status, header, raw, err := c.post(ctx, chargePath, body)
	if err != nil {
		return Decision{}, c.chargeFailed(err)
	}
	var w wireDecision
	if err := json.Unmarshal(raw, &w); err != nil {
		return Decision{}, c.chargeFailed(&UnavailableError{Reason: "bad answer", Status: status, Err: err})
	}
	c.charges.Add(1)
	return w.decision(status, rateLimitHeaders(header), raw), nil
}

// chargeFailed logs and counts a lost charge (in that order: whoever sees the count sees
// the log line), and gives its error back.
func (c *Client) chargeFailed(err error) error {
	c.chargeLog.failure(err)
	c.chargeFailures.Add(1)
	return err
}

// ChargeInBackground charges what the finished response used, in a goroutine of its own, and
// returns at once: the middlewares call it when the handler has returned, with the meter that
// saw the body and a copy of the response's header. The amount is the meter's (nothing is
// sent when it gives none, or 0). A failed charge is counted and logged, never returned.
func (c *Client) ChargeInBackground(policy, key, tier string, m Meter, status int, header http.Header) {
	select {
	case c.chargeSlots <- struct{}{}:
	default:
		c.chargeFailed(&UnavailableError{Reason: "too many charges in flight"})
		return
	}
	go func() {
		defer func() { <-c.chargeSlots }()
		amount, ok := m.Amount(status, header)
		if !ok || amount == 0 {
			return
		}
		_, _ = c.Charge(context.Background(), policy, key, amount, tier)
	}()
}
