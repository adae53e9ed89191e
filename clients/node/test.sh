#!/usr/bin/env bash
# Runs the Node client's tests (node's built-in runner) against the sluiced named by $SLUICED.
# Installs the dev dependencies (express, fastify, autocannon) from the lock file when missing.
# Under CI a missing $SLUICED fails the tests; outside CI the tests needing it are skipped.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "clients/node/test.sh: node and npm are needed (apt-get install nodejs npm)" >&2
  exit 1
fi
major="$(node -p 'process.versions.node.split(".")[0]')"
if (( major < 20 )); then
  echo "clients/node/test.sh: node >= 20 is needed, found $(node --version)" >&2
  exit 1
fi

if [[ ! -d node_modules ]]; then
  if [[ -f package-lock.json ]]; then
    npm ci --no-audit --no-fund
  else
    npm install --no-audit --no-fund
  fi
fi

if [[ -n "${SLUICED:-}" && "${SLUICED}" != /* ]]; then
  SLUICED="$(cd "$(dirname "$SLUICED")" && pwd)/$(basename "$SLUICED")"
  export SLUICED
fi

exec node --test --test-concurrency=3 test/*.test.js
