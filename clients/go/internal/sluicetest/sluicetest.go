// Package sluicetest starts a real sluiced for the tests and the benchmark of the Go client:
// its own temporary config, a Unix socket in a temporary directory, stopped at the end.
// It exists so that both packages' tests (and the bench program) drive the real daemon the
// same way instead of each growing its own launcher.
package sluicetest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	sluice "github.com/sluice-rs/sluice/clients/go"
)

// Binary is the sluiced the tests run: env SLUICED. When it is unset or not there the test
// fails if env CI is set, and is skipped otherwise (a developer without a build).
func Binary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("SLUICED")
	why := ""
	if bin == "" {
		why = "env SLUICED is not set (the path of a sluiced binary)"
	} else if st, err := os.Stat(bin); err != nil {
		why = fmt.Sprintf("SLUICED=%s: %v", bin, err)
	} else if st.IsDir() {
		why = fmt.Sprintf("SLUICED=%s is a directory", bin)
	}
	if why != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s; CI is set, so this fails instead of skipping", why)
		}
		t.Skip(why)
	}
	return bin
}

// Daemon is one running (or stopped) sluiced.
type Daemon struct {
	bin    string
	Dir    string
	Socket string
	config string
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
}

// Launch writes a config (a [listen] section on Dir/s.sock, then body) and starts sluiced.
// listen holds the other [listen] keys (e.g. `http = "127.0.0.1:9100"`); "" means
// `http = ""` (the socket only).
func Launch(bin, dir, listen, body string) (*Daemon, error) {
	sock := filepath.Join(dir, "s.sock")
	if listen == "" {
		listen = `http = ""`
	}
	cfg := fmt.Sprintf("[listen]\nunix = %q\nshutdown_timeout = \"1s\"\n%s\n\n%s\n", sock, listen, body)
	path := filepath.Join(dir, "sluice.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	d := &Daemon{bin: bin, Dir: dir, Socket: sock, config: path, log: filepath.Join(dir, "sluiced.log")}
	return d, d.Start()
}

// Start starts the daemon again (after Stop) on the same socket and config, and waits until
// it answers /healthz.
func (d *Daemon) Start() error {
	logf, err := os.OpenFile(d.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(d.bin, "--config", d.config)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Env = append(os.Environ(), "RUST_LOG=warn")
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	logf.Close()
	d.cmd = cmd
	d.exited = make(chan struct{})
	go func() { _ = cmd.Wait(); close(d.exited) }()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-d.exited:
			return fmt.Errorf("sluiced exited at start: %s", d.Logs())
		default:
		}
		if healthy(d.Socket) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	d.Stop()
	return fmt.Errorf("sluiced did not answer /healthz on %s within 15 s: %s", d.Socket, d.Logs())
}

// Stop sends SIGTERM and waits (SIGKILL after 5 s).
func (d *Daemon) Stop() {
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(5 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	d.cmd = nil
}

// Pid is the running daemon's process id, 0 when stopped.
func (d *Daemon) Pid() int {
	if d.cmd == nil {
		return 0
	}
	return d.cmd.Process.Pid
}

// Logs is the tail of what sluiced wrote.
func (d *Daemon) Logs() string {
	b, err := os.ReadFile(d.log)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func healthy(sock string) bool {
	c := http.Client{
		Timeout: time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}},
	}
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://sluiced/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Start launches a daemon for one test, stopped when the test ends.
func Start(t testing.TB, listen, body string) *Daemon {
	t.Helper()
	bin := Binary(t)
	d, err := Launch(bin, t.TempDir(), listen, body)
	if err != nil {
		t.Fatalf("starting sluiced: %v", err)
	}
	t.Cleanup(d.Stop)
	return d
}

// Restart starts a stopped daemon again, failing the test when it does not come up.
func (d *Daemon) Restart(t testing.TB) {
	t.Helper()
	if err := d.Start(); err != nil {
		t.Fatalf("restarting sluiced: %v", err)
	}
}

// ClosedPort is a loopback TCP port nothing listens on (bound, then released).
func ClosedPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// FreeAddr is a loopback address for a listener the daemon opens ("127.0.0.1:PORT").
func FreeAddr(t testing.TB) string {
	return fmt.Sprintf("127.0.0.1:%d", ClosedPort(t))
}

// Policies is the test config: small fixed windows (3 per hour, so no window edge falls
// inside a test run in practice) with a tier, and a fail-closed policy.
const Policies = `
[backend]
kind = "memory"

[policies.fixed]
algorithm = "fixed_window"
limit = 3
window = "1h"
tiers = { pro = { limit = 10 } }
endpoints = ["/items/:id"]

[policies.closed]
algorithm = "fixed_window"
limit = 3
window = "1h"
fail = "closed"
`

// DownBackend is a config whose Redis backend is a closed loopback port: the fail-closed
// policy answers 503, the fail-open one 200 degraded.
func DownBackend(t testing.TB) string {
	return fmt.Sprintf(`
[backend]
kind = "redis"
url = "redis://127.0.0.1:%d"
timeout = "20ms"

[policies.closed]
algorithm = "fixed_window"
limit = 3
window = "1h"
fail = "closed"

[policies.open]
algorithm = "fixed_window"
limit = 3
window = "1h"
fail = "open"
`, ClosedPort(t))
}

// ConnsTo counts the connections a daemon has accepted on socket, from /proc/net/unix
// (each accepted connection is a socket bound to the path; the listener has the
// __SO_ACCEPTCON flag, 00010000).
func ConnsTo(socket string) (int, error) {
	b, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || f[len(f)-1] != socket {
			continue
		}
		if f[3] == "00010000" {
			continue
		}
		n++
	}
	return n, nil
}

// SameRateLimitHeaders fails the test unless got and want hold the same values of every
// header a service passes on (sluice.HeaderNames), absent ones included.
func SameRateLimitHeaders(t testing.TB, got, want http.Header) {
	t.Helper()
	for _, name := range sluice.HeaderNames {
		g, w := strings.Join(got.Values(name), ", "), strings.Join(want.Values(name), ", ")
		if g != w {
			t.Errorf("header %s: got %q, sluiced sent %q", name, g, w)
		}
	}
}

// NoRateLimitHeaders fails the test when h holds any header of sluice.HeaderNames.
func NoRateLimitHeaders(t testing.TB, h http.Header) {
	t.Helper()
	for _, name := range sluice.HeaderNames {
		if v := h.Values(name); len(v) > 0 {
			t.Errorf("header %s = %q on an answer sluiced did not decide", name, v)
		}
	}
}

// Freeze stops the daemon with SIGSTOP and waits until every one of its threads is stopped
// (the signal is delivered asynchronously): the kernel still accepts connections and takes
// requests, nothing answers. Thaw (also run when the test ends) continues it.
func (d *Daemon) Freeze(t testing.TB) {
	t.Helper()
	pid := d.Pid()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	deadline := time.Now().Add(10 * time.Second)
	for !allStopped(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("sluiced (pid %d) did not stop within 10 s of SIGSTOP", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

// Thaw continues a frozen daemon.
func (d *Daemon) Thaw(t testing.TB) {
	t.Helper()
	if err := syscall.Kill(d.Pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// allStopped says whether every thread of pid is in state T (stopped).
func allStopped(pid int) bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err != nil {
			return false
		}
		// The state follows the command name, which is in parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) || s[i+2] != 'T' {
			return false
		}
	}
	return true
}
