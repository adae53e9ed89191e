#!/usr/bin/env bash
# Runs the Node client's tests (node's built-in runner) against the sluiced named by $SLUICED.
# Installs the dev dependencies (express, fastify, typescript, @types/node) from the lock file
# when missing, checks the types (tsc --noEmit on test/types.ts) and what `npm pack` publishes.
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

# The declarations, as a TypeScript app that installed the package compiles against them.
npx --no-install tsc -p tsconfig.json

# The tarball npm would publish: the code, the types, the README, the license field.
npm pack --dry-run --json --ignore-scripts >"${TMPDIR:-/tmp}/sluice-node-pack.json"
node -e '
  const [pack] = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const files = pack.files.map((f) => f.path);
  for (const need of ["package.json", "index.d.ts", "README.md", "src/index.js", "src/client.js"]) {
    if (!files.includes(need)) throw new Error(`npm pack leaves out ${need}: ${files}`);
  }
  for (const f of files) {
    if (f.startsWith("test/") || f.startsWith("bench/")) throw new Error(`npm pack ships ${f}`);
  }
  const { license } = require("./package.json");
  if (license !== "Apache-2.0") throw new Error(`license ${license}, not Apache-2.0`);
' "${TMPDIR:-/tmp}/sluice-node-pack.json"
rm -f "${TMPDIR:-/tmp}/sluice-node-pack.json"

if [[ -n "${SLUICED:-}" && "${SLUICED}" != /* ]]; then
  SLUICED="$(cd "$(dirname "$SLUICED")" && pwd)/$(basename "$SLUICED")"
  export SLUICED
fi

exec node --test --test-concurrency=3 test/*.test.js
