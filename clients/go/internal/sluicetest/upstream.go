package sluicetest

// What the charge tests of both middlewares share: a usage policy, an OpenAI-compatible
// upstream that reports the tokens each answer used (in JSON and in server-sent events),
// and waiting for the charges a middleware sends in the background.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	sluice "github.com/sluice-rs/sluice/clients/go"
)

// UsagePolicies is a usage policy of 100 tokens a week (a fixed window aligned to unix time,
// so no window edge falls inside a test run in practice), and a policy that is not one.
const UsagePolicies = `
[backend]
kind = "memory"

[policies.tokens]
algorithm = "fixed_window"
limit = 100
window = "7d"
usage = true

[policies.plain]
algorithm = "fixed_window"
limit = 100
window = "7d"
`

// Tokens is what every answer of the Upstream used.
const Tokens = 40

// SSEBody is the event stream the Upstream sends at /sse: token deltas, then the chunk that
// carries usage (stream_options.include_usage), then [DONE].
var SSEBody = []string{
	`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hel"}}],"usage":null}` + "\n\n",
	`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"lo"}}],"usage":null}` + "\n\n",
	fmt.Sprintf(`data: {"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":15,"completion_tokens":25,"total_tokens":%d}}`, Tokens) + "\n\n",
	"data: [DONE]\n\n",
}

// JSONBody is the completion the Upstream answers at /json.
var JSONBody = fmt.Sprintf(`{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello"}}],"usage":{"prompt_tokens":15,"completion_tokens":25,"total_tokens":%d}}`, Tokens)

// Upstream is an OpenAI-compatible upstream on loopback: /json answers JSONBody, /sse streams
// SSEBody (flushing each event).
type Upstream struct {
	URL string

	mu      sync.Mutex
	entered chan struct{}
	release chan struct{}
}

// StartUpstream starts an Upstream, closed when the test ends.
func StartUpstream(t testing.TB) *Upstream {
	t.Helper()
	u := &Upstream{}
	srv := httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(srv.Close)
	u.URL = srv.URL
	return u
}

// Hold makes the next request wait before answering: entered is closed when it arrives
// (so its check has been answered), and it answers once release is called.
func (u *Upstream) Hold() (entered <-chan struct{}, release func()) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.entered, u.release = make(chan struct{}), make(chan struct{})
	rel := u.release
	var once sync.Once
	return u.entered, func() { once.Do(func() { close(rel) }) }
}

func (u *Upstream) serve(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	entered, release := u.entered, u.release
	u.entered, u.release = nil, nil
	u.mu.Unlock()
	if entered != nil {
		close(entered)
		<-release
	}
	switch r.URL.Path {
	case "/json":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(JSONBody))
	case "/sse":
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		for _, event := range SSEBody {
			_, _ = w.Write([]byte(event))
			w.(http.Flusher).Flush()
		}
	default:
		http.NotFound(w, r)
	}
}

// WaitCharges waits (10 s at most) until c has sent charges answered and failed charges
// in all, and fails the test if it has not or if more were sent.
func WaitCharges(t testing.TB, c *sluice.Client, charges, failures uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := c.Stats()
		if s.Charges == charges && s.ChargeFailures == failures {
			return
		}
		if s.Charges > charges || s.ChargeFailures > failures || time.Now().After(deadline) {
			t.Fatalf("charges %d, failed %d; want %d and %d", s.Charges, s.ChargeFailures, charges, failures)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Fetch is how a test asks its app for path as user: status, headers, body.
type Fetch func(path, user string) (int, http.Header, string)

// SpendBudget asks for path four times as user through an app charging into UsagePolicies'
// "tokens" with client c: 100 tokens, 40 an answer, so requests 1–3 pass (the third leaves the
// key in debt) and the 4th is denied with Retry-After. Each charge is awaited before the next
// request, since it is sent after the answer.
func SpendBudget(t *testing.T, c *sluice.Client, fetch Fetch, path, user, want string) {
	t.Helper()
	for i := 1; i <= 3; i++ {
		status, _, body := fetch(path, user)
		if status != http.StatusOK || body != want {
			t.Fatalf("request %d: %d %q", i, status, body)
		}
		WaitCharges(t, c, uint64(i), 0)
	}
	if status, header, _ := fetch(path, user); status != http.StatusTooManyRequests || header.Get("Retry-After") == "" {
		t.Errorf("request 4: %d %v", status, header)
	}
}

// AnswerBeforeCharge holds a request as user in the upstream once its check is answered,
// freezes d, lets the request finish and checks that its whole answer (want) arrived while
// its charge was still waiting for sluiced; then thaws d and waits for the charge.
func AnswerBeforeCharge(t *testing.T, d *Daemon, up *Upstream, c *sluice.Client, fetch Fetch, path, user, want string) {
	t.Helper()
	entered, release := up.Hold()
	type answer struct {
		status int
		body   string
	}
	done := make(chan answer, 1)
	go func() {
		status, _, body := fetch(path, user)
		done <- answer{status, body}
	}()
	<-entered
	d.Freeze(t)
	release()
	a := <-done
	if a.status != http.StatusOK || a.body != want {
		t.Fatalf("answer: %d %q", a.status, a.body)
	}
	if s := c.Stats(); s.Charges != 0 || s.ChargeFailures != 0 {
		t.Fatalf("the charge ended before the answer did: %+v", s)
	}
	d.Thaw(t)
	WaitCharges(t, c, 1, 0)
}
