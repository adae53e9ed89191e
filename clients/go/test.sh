#!/usr/bin/env bash
# Tests of the Go client and its net/http and gin middleware, against a real sluiced
# (env SLUICED, see goenv.sh; the tests fail without it when CI is set): gofmt, then go vet and
# go test in GOPATH mode (goenv.sh) and again in module mode (modmode.sh).
# GO_TEST_FLAGS: extra flags for go test (e.g. "-race").
set -euo pipefail
# shellcheck source=goenv.sh
source "$(dirname "$0")/goenv.sh"

unformatted="$(gofmt -l .)"
if [ -n "$unformatted" ]; then
  echo "clients/go/test.sh: not gofmt-formatted: $unformatted" >&2
  exit 1
fi
go vet ./... ./gin/...
# shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
go test -count=1 ${GO_TEST_FLAGS:-} -v ./... ./gin/...

# Module mode, as a user's `go build` sees the two modules (see modmode.sh).
# shellcheck source=modmode.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/modmode.sh"
if go list -deps ./... | grep -q '^github.com/gin-gonic/'; then
  echo "clients/go/test.sh: the root module pulls in gin" >&2
  exit 1
fi
go vet ./... ./gin/...
# shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
go test -count=1 ${GO_TEST_FLAGS:-} ./... ./gin/...
