package sluicegin_test

// Every gin and net/http app the docs show runs as written. A block fenced ```go app``` in the
// repository's README, the book (docs/src) or the Go client's README is a whole program: it
// listens on $PORT and guards GET / with policy "public" through the client's defaults
// ($SLUICE_SOCKET). Each is built in this module (so it compiles against this gin and this
// client, in GOPATH and in module mode alike), run against a real sluiced whose "public" allows
// 3 requests, and must answer 200 three times, then 429 with Retry-After.

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rs/sluice/clients/go/internal/sluicetest"
)

type snippet struct{ where, code string }

// repoRoot is the repository's root: three levels above this package's real directory (the
// tests may run in a GOPATH that links to it).
func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	real, err := filepath.EvalSymlinks(wd)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Clean(filepath.Join(real, "..", "..", ".."))
}

// documents are the README, the book's pages and the Go client's README.
func documents(t *testing.T, root string) []string {
	t.Helper()
	docs := []string{filepath.Join(root, "README.md")}
	err := filepath.Walk(filepath.Join(root, "docs", "src"), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && strings.HasSuffix(p, ".md") {
			docs = append(docs, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return append(docs, filepath.Join(root, "clients", "go", "README.md"))
}

var fence = regexp.MustCompile("^(\\s*)```(.*)$")

// appSnippets are the ```go app``` blocks of the docs.
func appSnippets(t *testing.T, root string) []snippet {
	t.Helper()
	var found []snippet
	for _, doc := range documents(t, root) {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(text), "\n")
		for i := 0; i < len(lines); i++ {
			m := fence.FindStringSubmatch(lines[i])
			if m == nil {
				continue
			}
			end := i + 1
			for end < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[end]), "```") {
				end++
			}
			info := strings.FieldsFunc(m[2], func(r rune) bool { return r == ',' || r == ' ' })
			if len(info) > 1 && info[0] == "go" && contains(info[1:], "app") {
				var body []string
				for _, l := range lines[i+1 : end] {
					cut := len(l) - len(strings.TrimLeft(l, " "))
					if cut > len(m[1]) {
						cut = len(m[1])
					}
					body = append(body, l[cut:])
				}
				rel, _ := filepath.Rel(root, doc)
				found = append(found, snippet{fmt.Sprintf("%s:%d", rel, i+1), strings.Join(body, "\n") + "\n"})
			}
			i = end
		}
	}
	return found
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestDocsAppsAnswer200ThenTooManyRequests(t *testing.T) {
	root := repoRoot(t)
	snippets := appSnippets(t, root)
	all := ""
	for _, s := range snippets {
		all += s.code
	}
	if len(snippets) < 4 || !strings.Contains(all, "github.com/gin-gonic/gin") || !strings.Contains(all, "net/http") {
		t.Fatalf("want a gin and a net/http app in the docs, found %d: %v", len(snippets), snippets)
	}
	for _, s := range snippets {
		s := s
		t.Run(s.where, func(t *testing.T) {
			d := sluicetest.Start(t, "", "[policies.public]\nalgorithm = \"fixed_window\"\nlimit = 3\nwindow = \"7d\"\n")
			dir := t.TempDir()
			src := filepath.Join(dir, "main.go")
			if err := os.WriteFile(src, []byte(s.code), 0o600); err != nil {
				t.Fatal(err)
			}
			bin := filepath.Join(dir, "app")
			build := exec.Command("go", "build", "-o", bin, src)
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("%s does not build: %v\n%s", s.where, err, out)
			}
			port := sluicetest.ClosedPort(t)
			app := exec.Command(bin)
			app.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port), "SLUICE_SOCKET="+d.Socket, "GIN_MODE=release")
			var log strings.Builder
			app.Stdout, app.Stderr = &log, &log
			if err := app.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = app.Process.Kill(); _ = app.Wait() }()
			url := fmt.Sprintf("http://127.0.0.1:%d/", port)
			client := &http.Client{Timeout: 5 * time.Second}
			var statuses []int
			var last *http.Response
			deadline := time.Now().Add(20 * time.Second)
			for len(statuses) < 4 {
				resp, err := client.Get(url)
				if err != nil {
					if time.Now().After(deadline) {
						t.Fatalf("%s never listened on $PORT: %v\n%s", s.where, err, log.String())
					}
					time.Sleep(50 * time.Millisecond)
					continue
				}
				resp.Body.Close()
				statuses = append(statuses, resp.StatusCode)
				last = resp
			}
			if fmt.Sprint(statuses) != "[200 200 200 429]" || last.Header.Get("Retry-After") == "" {
				t.Fatalf("%s answered %v (Retry-After %q), want [200 200 200 429]\n%s", s.where, statuses, last.Header.Get("Retry-After"), log.String())
			}
		})
	}
}
