#!/usr/bin/env bash
# Tests of the Go client and its net/http and gin middleware, against a real sluiced
# (env SLUICED, see goenv.sh; the tests fail without it when CI is set).
# GO_TEST_FLAGS: extra flags for go test (e.g. "-race").
set -euo pipefail
# shellcheck source=goenv.sh
source "$(dirname "$0")/goenv.sh"

unformatted="$(gofmt -l .)"
if [ -n "$unformatted" ]; then
  echo "clients/go/test.sh: not gofmt-formatted: $unformatted" >&2
  exit 1
fi
go vet ./...
# shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
go test -count=1 ${GO_TEST_FLAGS:-} -v ./...
