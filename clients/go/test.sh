#!/usr/bin/env bash
# Tests of the Go client and its net/http and gin middleware, against a real sluiced.
#
# No Go module proxy is reachable where CI runs, so the packages build in GOPATH mode against
# Debian's Go packages: golang-go (Go 1.19) and golang-github-gin-gonic-gin-dev (gin and its
# dependencies under /usr/share/gocode), installed here when missing. The module directory is
# linked into a temporary GOPATH under its import path.
#
# SLUICED: the sluiced binary the tests start (default: target/release/sluiced of this
# repository when it exists). Unset or missing, the tests fail when CI is set.
# GO_TEST_FLAGS: extra flags for go test (e.g. "-race").
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
missing=()
command -v go >/dev/null 2>&1 || missing+=(golang-go)
[ -f /usr/share/gocode/src/github.com/gin-gonic/gin/gin.go ] || missing+=(golang-github-gin-gonic-gin-dev)
if [ ${#missing[@]} -gt 0 ]; then
  echo "clients/go/test.sh: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Go 1.19 or later (go.mod says 1.19; the client uses atomic.Uint64 and net/netip).
version="$(go env GOVERSION)"
minor="$(echo "$version" | sed -n 's/^go1\.\([0-9]*\).*/\1/p')"
if [ -z "$minor" ] || [ "$minor" -lt 19 ]; then
  echo "clients/go/test.sh: Go 1.19 or later is needed, found $version" >&2
  exit 1
fi

if [ -z "${SLUICED:-}" ] && [ -x "$root/target/release/sluiced" ]; then
  SLUICED="$root/target/release/sluiced"
fi
if [ -n "${SLUICED:-}" ]; then
  SLUICED="$(cd "$(dirname "$SLUICED")" && pwd)/$(basename "$SLUICED")"
  export SLUICED
elif [ -n "${CI:-}" ]; then
  echo "clients/go/test.sh: SLUICED is not set and $root/target/release/sluiced does not exist" >&2
  exit 1
fi

gopath="$(mktemp -d)"
trap 'rm -rf "$gopath"' EXIT
pkg="$gopath/src/github.com/sluice-rs/sluice/clients"
mkdir -p "$pkg"
ln -s "$here" "$pkg/go"
export GOPATH="$gopath:/usr/share/gocode" GO111MODULE=off GOFLAGS="" GOPROXY=off
cd "$pkg/go"

unformatted="$(gofmt -l .)"
if [ -n "$unformatted" ]; then
  echo "clients/go/test.sh: not gofmt-formatted: $unformatted" >&2
  exit 1
fi
go vet ./...
# shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
go test -count=1 ${GO_TEST_FLAGS:-} -v ./...
