package sluice

// Meters: how a middleware learns what a response used (its LLM tokens, say) without holding
// the response back. The middleware writes every piece of the body to the meter as the piece
// goes to the client, and asks the meter for the amount only once the response is finished,
// in the charge's own goroutine.

import (
	"io"
	"net/http"
)

// Meter measures what one response used. A middleware with Options.Charge makes one per
// allowed request, writes each piece of the response body to it as that piece is written to
// the client, and once the handler has returned calls Amount in the goroutine that sends the
// charge. Write must not fail the response: its error is ignored.
type Meter interface {
	io.Writer
	// Amount is what the finished response used; ok false (or 0) charges nothing.
	Amount(status int, header http.Header) (amount int64, ok bool)
}

// meteredWriter passes a response through unchanged, showing its body to a meter and
// recording its status.
type meteredWriter struct {
	http.ResponseWriter
	meter  Meter
	status int
}

func (w *meteredWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *meteredWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	if n > 0 {
		_, _ = w.meter.Write(p[:n])
	}
	return n, err
}

// Flush keeps a streamed answer (server-sent events) streaming through the meter.
func (w *meteredWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController (Go 1.20+) the writer underneath.
func (w *meteredWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finished is the status a handler answered with (200 when it wrote nothing).
func (w *meteredWriter) finished() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// serveMetered runs next, and when charge gives a meter for r, shows it the response and
// charges its amount to chk's policy, key and tier once next has returned.
func serveMetered(client *Client, charge func(*http.Request) Meter, next http.Handler,
	w http.ResponseWriter, r *http.Request, chk Check) {
	var m Meter
	if charge != nil {
		m = charge(r)
	}
	if m == nil {
		next.ServeHTTP(w, r)
		return
	}
	mw := &meteredWriter{ResponseWriter: w, meter: m}
	next.ServeHTTP(mw, r)
	client.ChargeInBackground(chk.Policy, chk.Key, chk.Tier, m, mw.finished(), w.Header().Clone())
}
