# shellcheck shell=bash
# Sourced by test.sh and bench.sh: the Go toolchain and the GOPATH the packages build in.
#
# No Go module proxy is reachable where CI runs, so the packages build in GOPATH mode against
# Debian's Go packages: golang-go (Go 1.19) and golang-github-gin-gonic-gin-dev (gin and its
# dependencies under /usr/share/gocode), installed here when missing. The module directory is
# linked into a temporary GOPATH under its import path, and the caller is left in it.
#
# SLUICED: the sluiced binary (default: target/release/sluiced of this repository when it
# exists); exported as an absolute path. Unset and not found, this fails when CI is set.

goenv_here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
goenv_root="$(cd "$goenv_here/../.." && pwd)"

goenv_sudo=""
[ "$(id -u)" -eq 0 ] || goenv_sudo="sudo"
goenv_missing=()
command -v go >/dev/null 2>&1 || goenv_missing+=(golang-go)
[ -f /usr/share/gocode/src/github.com/gin-gonic/gin/gin.go ] || goenv_missing+=(golang-github-gin-gonic-gin-dev)
if [ ${#goenv_missing[@]} -gt 0 ]; then
  echo "clients/go: installing ${goenv_missing[*]}"
  $goenv_sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $goenv_sudo apt-get install -y -qq --no-install-recommends "${goenv_missing[@]}"
fi

# Go 1.19 or later (go.mod says 1.19; the client uses atomic.Uint64 and net/netip).
goenv_version="$(go env GOVERSION)"
goenv_minor="$(echo "$goenv_version" | sed -n 's/^go1\.\([0-9]*\).*/\1/p')"
if [ -z "$goenv_minor" ] || [ "$goenv_minor" -lt 19 ]; then
  echo "clients/go: Go 1.19 or later is needed, found $goenv_version" >&2
  exit 1
fi

if [ -z "${SLUICED:-}" ] && [ -x "$goenv_root/target/release/sluiced" ]; then
  SLUICED="$goenv_root/target/release/sluiced"
fi
if [ -n "${SLUICED:-}" ]; then
  SLUICED="$(cd "$(dirname "$SLUICED")" && pwd)/$(basename "$SLUICED")"
  export SLUICED
elif [ -n "${CI:-}" ]; then
  echo "clients/go: SLUICED is not set and $goenv_root/target/release/sluiced does not exist" >&2
  exit 1
fi

goenv_gopath="$(mktemp -d)"
trap 'rm -rf "$goenv_gopath"' EXIT
mkdir -p "$goenv_gopath/src/github.com/sluice-rs/sluice/clients"
ln -s "$goenv_here" "$goenv_gopath/src/github.com/sluice-rs/sluice/clients/go"
export GOPATH="$goenv_gopath:/usr/share/gocode" GO111MODULE=off GOFLAGS="" GOPROXY=off
cd "$goenv_gopath/src/github.com/sluice-rs/sluice/clients/go"
