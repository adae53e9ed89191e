// Command bench measures what the Go middleware costs a request, in one run against a real
// sluiced: (a) the bare client call over the socket, N sequential calls; (b) one net/http app
// whose route is served with and without the middleware, under the same closed-loop load
// (C workers, keep-alive), phases interleaved so drift hits both alike. It prints a markdown
// table: the added latency per request (with − without) and its ratio to (a), and the most
// connections sluiced held during the run against the client's pool size.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"

	sluice "github.com/sluice-rs/sluice/clients/go"
	"github.com/sluice-rs/sluice/clients/go/internal/sluicetest"
)

const policy = `
[backend]
kind = "memory"

[policies.bench]
algorithm = "token_bucket"
limit = 1000000000
window = "1s"
`

func main() {
	bin := flag.String("sluiced", os.Getenv("SLUICED"), "sluiced binary (default: env SLUICED)")
	n := flag.Int("n", 5000, "sequential bare client calls")
	conc := flag.Int("c", 1, "load generator workers (keep-alive connections to the app)")
	dur := flag.Duration("d", 2*time.Second, "length of each load phase")
	rounds := flag.Int("rounds", 3, "without/with phase pairs, interleaved")
	pool := flag.Int("pool", sluice.DefaultMaxConns, "client pool size (ClientOptions.MaxConns)")
	flag.Parse()
	if *bin == "" {
		log.Fatal("bench: give -sluiced or env SLUICED")
	}
	if err := run(*bin, *n, *conc, *dur, *rounds, *pool); err != nil {
		log.Fatal(err)
	}
}

func run(bin string, n, conc int, dur time.Duration, rounds, pool int) error {
	dir, err := os.MkdirTemp("", "sluice-gobench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	d, err := sluicetest.Launch(bin, dir, "", policy)
	if err != nil {
		return err
	}
	defer d.Stop()
	c, err := sluice.NewClient(sluice.ClientOptions{Target: d.Socket, MaxConns: pool, Timeout: time.Second})
	if err != nil {
		return err
	}
	defer c.Close()

	// (a) the bare call.
	chk := sluice.Check{Policy: "bench", Key: "ip:127.0.0.1"}
	for i := 0; i < 500; i++ {
		if _, err := c.Check(context.Background(), chk); err != nil {
			return err
		}
	}
	// (b) the same app route without and with the middleware.
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux := http.NewServeMux()
	mux.Handle("/without", ok)
	mux.Handle("/with", sluice.Middleware(c, sluice.Options{Policy: "bench"})(ok))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	base := "http://" + ln.Addr().String()

	// Every round runs its share of (a), then (b) without and with: drift in the machine's
	// load falls on all of them alike.
	floor, err := newRawConn(d.Socket)
	if err != nil {
		return err
	}
	defer floor.Close()
	var bare, raw, bareConc, without, with []time.Duration
	maxConns := 0
	for r := 0; r < rounds; r++ {
		// (a), and interleaved with it the floor: the same request written by hand on one
		// connection, its answer read with net/http's parser, no pool, no transport goroutines.
		for i := 0; i < n/rounds; i++ {
			t0 := time.Now()
			if err := floor.check(); err != nil {
				return err
			}
			raw = append(raw, time.Since(t0))
			t0 = time.Now()
			if _, err := c.Check(context.Background(), chk); err != nil {
				return err
			}
			bare = append(bare, time.Since(t0))
		}
		// With several workers, the bare call at that concurrency too: what (b) pays per
		// check when its checks queue on the same two ends.
		if conc > 1 {
			lat, err := closedLoop(conc, dur/2, nil, func() error {
				_, err := c.Check(context.Background(), chk)
				return err
			})
			if err != nil {
				return err
			}
			bareConc = append(bareConc, lat...)
		}
		lat, err := load(base+"/without", conc, dur, nil)
		if err != nil {
			return err
		}
		without = append(without, lat...)
		lat, err = load(base+"/with", conc, dur, func() {
			if k, err := sluicetest.ConnsTo(d.Socket); err == nil && k > maxConns {
				maxConns = k
			}
		})
		if err != nil {
			return err
		}
		with = append(with, lat...)
	}
	st := c.Stats()

	aMean, aP50 := mean(bare), pct(bare, 50)
	wo, wi := mean(without), mean(with)
	added := wi - wo
	addedP50 := pct(with, 50) - pct(without, 50)
	fmt.Printf("| measure | mean | p50 | p99 | n |\n|---|---|---|---|---|\n")
	fmt.Printf("| (a) bare client.Check over the socket, sequential | %s | %s | %s | %d |\n", us(aMean), us(aP50), us(pct(bare, 99)), len(bare))
	fmt.Printf("| floor: the same request by hand on one connection, interleaved with (a) | %s | %s | %s | %d |\n", us(mean(raw)), us(pct(raw, 50)), us(pct(raw, 99)), len(raw))
	if conc > 1 {
		fmt.Printf("| (a') bare client.Check, %d concurrent callers | %s | %s | %s | %d |\n", conc, us(mean(bareConc)), us(pct(bareConc, 50)), us(pct(bareConc, 99)), len(bareConc))
	}
	fmt.Printf("| (b) app route without middleware, %d workers | %s | %s | %s | %d |\n", conc, us(wo), us(pct(without, 50)), us(pct(without, 99)), len(without))
	fmt.Printf("| (b) app route with middleware, %d workers | %s | %s | %s | %d |\n", conc, us(wi), us(pct(with, 50)), us(pct(with, 99)), len(with))
	fmt.Printf("| added per request (with − without) | %s | %s | | |\n", us(added), us(addedP50))
	fmt.Printf("\nadded / bare call: %.2fx (mean), %.2fx (p50); target <= 1.5x\n",
		float64(added)/float64(aMean), float64(addedP50)/float64(aP50))
	if conc > 1 {
		fmt.Printf("added / bare call at %d concurrent callers (a'): %.2fx (mean), %.2fx (p50)\n",
			conc, float64(added)/float64(mean(bareConc)), float64(addedP50)/float64(pct(bareConc, 50)))
	}
	fmt.Printf("requests/s: without %.0f, with %.0f (%d workers, %d x %s per kind)\n",
		float64(len(without))/(float64(rounds)*dur.Seconds()), float64(len(with))/(float64(rounds)*dur.Seconds()), conc, rounds, dur)
	// The floor's own connection stays open through (b): not the client's.
	fmt.Printf("connections the client opened to sluiced's socket during (b): at most %d (client pool size %d); checks %d, unavailable %d\n",
		maxConns-1, pool, st.Checks, st.Unavailable)
	if st.Unavailable != 0 {
		return fmt.Errorf("bench: %d checks failed: the figures above include fail-open requests", st.Unavailable)
	}
	return nil
}

// load runs conc closed-loop workers on url for dur and gives every request's latency;
// sample, when set, runs every 20 ms meanwhile.
func load(url string, conc int, dur time.Duration, sample func()) ([]time.Duration, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc, DisableCompression: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	return closedLoop(conc, dur, sample, func() error {
		resp, err := hc.Get(url)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s answered %d", url, resp.StatusCode)
		}
		return err
	})
}

// closedLoop runs conc workers each calling do in a loop for dur, and gives every call's
// latency; sample, when set, runs every 20 ms meanwhile.
func closedLoop(conc int, dur time.Duration, sample func(), do func() error) ([]time.Duration, error) {
	stop := time.Now().Add(dur)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var all []time.Duration
	var firstErr error
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 1<<14)
			for time.Now().Before(stop) {
				t0 := time.Now()
				if err := do(); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}()
	}
	if sample != nil {
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		tick := time.NewTicker(20 * time.Millisecond)
	loop:
		for {
			select {
			case <-done:
				break loop
			case <-tick.C:
				sample()
			}
		}
		tick.Stop()
	}
	wg.Wait()
	return all, firstErr
}

func mean(xs []time.Duration) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	var sum time.Duration
	for _, x := range xs {
		sum += x
	}
	return sum / time.Duration(len(xs))
}

func pct(xs []time.Duration, p int) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)*p/100]
}

func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond)) }

// rawConn is one connection to sluiced with the check request written by hand.
type rawConn struct {
	net.Conn
	r   *bufio.Reader
	req []byte
}

func newRawConn(socket string) (*rawConn, error) {
	conn, err := net.Dial("unix", socket)
	if err != nil {
		return nil, err
	}
	body := `{"policy":"bench","key":"ip:127.0.0.1"}`
	req := fmt.Sprintf("POST /v1/check HTTP/1.1\r\nHost: sluiced\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	return &rawConn{Conn: conn, r: bufio.NewReader(conn), req: []byte(req)}, nil
}

func (c *rawConn) check() error {
	if err := c.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	if _, err := c.Write(c.req); err != nil {
		return err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("sluiced answered %d", resp.StatusCode)
	}
	return err
}
