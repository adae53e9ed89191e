#!/usr/bin/env bash
# Benchmark of the Python client and middleware against a real sluiced (not a test):
# (a) the bare client call, (b) FastAPI and Flask with vs without the middleware under wrk,
# (c) the connections sluiced holds during each run. Prints markdown tables.
# SLUICED must name the sluiced binary (a release build for meaningful figures).
# Usage: SLUICED=target/release/sluiced bash clients/python/bench.sh [--duration 5] [--conc 1,8]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if ! command -v wrk >/dev/null 2>&1; then
    apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }
fi
missing=()
for mod in fastapi uvicorn flask httpx; do  # httpx: a comparison row only, not a dependency
    python3 -c "import $mod" >/dev/null 2>&1 || missing+=("$mod")
done
if ((${#missing[@]})); then
    python3 -m pip install --quiet --disable-pip-version-check "${missing[@]}" ||
        python3 -m pip install --quiet --disable-pip-version-check --break-system-packages "${missing[@]}"
fi

exec python3 "$here/bench/run.py" "$@"
