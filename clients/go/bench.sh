#!/usr/bin/env bash
# What the Go middleware adds to a request, measured in one run against a real sluiced
# (env SLUICED, see goenv.sh): (a) the bare client call over the socket, sequential; (b) one
# net/http app route with and without the middleware under the same closed-loop load; the
# added latency per request, its ratio to (a) (target <= 1.5x), and the connections sluiced
# held against the client's pool size. Arguments go to the bench program:
#   -n 5000 (sequential calls) -c 1 (workers) -d 2s (phase) -rounds 3 -pool 32
set -euo pipefail
# shellcheck source=goenv.sh
source "$(dirname "$0")/goenv.sh"
if [ -z "${SLUICED:-}" ]; then
  echo "clients/go/bench.sh: set SLUICED to a sluiced binary (or build target/release/sluiced)" >&2
  exit 1
fi
go build -o "$goenv_gopath/bench" ./internal/cmd/bench
echo "Go $(go env GOVERSION), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
"$goenv_gopath/bench" -sluiced "$SLUICED" "$@"
