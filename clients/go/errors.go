package sluice

// The two kinds of failure a check can have, kept apart because a caller treats them
// differently: an unavailable daemon is an operational event (fail open or closed), a
// refused request is a bug in the application's configuration that must reach its log.

import (
	"errors"
	"fmt"
)

// ErrUnavailable is matched (errors.Is) by every error that means sluiced could not give a
// decision: it could not be reached, did not answer within the timeout, or gave an answer
// that is not one of its own (a status other than 200, 429, 503 and its 4xx errors, or a
// body that does not parse).
var ErrUnavailable = errors.New("sluice: rate limiter unavailable")

// UnavailableError says why sluiced gave no decision. It matches ErrUnavailable, and
// unwraps to the cause (for a timeout, context.DeadlineExceeded).
type UnavailableError struct {
	// Reason is a short description: "transport", "timeout", "bad answer".
	Reason string
	// Err is the cause; nil for a bad answer.
	Err error
	// Status is the HTTP status of a bad answer, 0 otherwise.
	Status int
}

func (e *UnavailableError) Error() string {
	switch {
	case e.Status != 0 && e.Err != nil:
		return fmt.Sprintf("sluice: rate limiter unavailable: %s (status %d): %v", e.Reason, e.Status, e.Err)
	case e.Status != 0:
		return fmt.Sprintf("sluice: rate limiter unavailable: %s (status %d)", e.Reason, e.Status)
	case e.Err != nil:
		return fmt.Sprintf("sluice: rate limiter unavailable: %s: %v", e.Reason, e.Err)
	default:
		return "sluice: rate limiter unavailable: " + e.Reason
	}
}

// Unwrap gives the cause.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// APIError is sluiced refusing the request itself: 400 bad_request or
// cost_exceeds_capacity, 404 unknown_policy, 405, 413. It carries sluiced's error code and
// message so that a misconfigured application sees them in its log.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("sluice: sluiced refused the check (status %d, %s): %s", e.Status, e.Code, e.Message)
}
