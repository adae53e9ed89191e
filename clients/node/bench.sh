#!/usr/bin/env bash
# Benchmarks the Node client and middleware against the sluiced named by $SLUICED (not a test):
# the bare client call vs the added latency of the Express and Fastify middleware under wrk, and
# the connections sluiced holds under load. Prints a markdown table.
# Env: SLUICED (required), BENCH_SECONDS (per wrk run, default 3), BENCH_N (bare calls per round, 3000), BENCH_ROUNDS (3).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

if [[ -z "${SLUICED:-}" || ! -x "${SLUICED}" ]]; then
  echo "clients/node/bench.sh: set SLUICED to the sluiced binary (got '${SLUICED:-}')" >&2
  exit 1
fi
if [[ "${SLUICED}" != /* ]]; then
  SLUICED="$(cd "$(dirname "$SLUICED")" && pwd)/$(basename "$SLUICED")"
  export SLUICED
fi
if ! command -v wrk >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
fi
if [[ ! -d node_modules ]]; then
  if [[ -f package-lock.json ]]; then
    npm ci --no-audit --no-fund
  else
    npm install --no-audit --no-fund
  fi
fi

exec node bench/bench.js
