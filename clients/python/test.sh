#!/usr/bin/env bash
# Tests of the Python client and middleware (clients/python) against a real sluiced.
# SLUICED must name the sluiced binary; without it the tests FAIL when CI is set.
# Run from anywhere: bash clients/python/test.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"

python3 -m pip --version >/dev/null 2>&1 || {
    echo "clients/python/test.sh: python3 with pip is required" >&2
    exit 1
}
missing=()
for mod in pytest fastapi uvicorn flask mypy; do
    python3 -c "import $mod" >/dev/null 2>&1 || missing+=("$mod")
done
if ((${#missing[@]})); then
    # A distribution's own python refuses installs into itself (PEP 668) unless told to.
    python3 -m pip install --quiet --disable-pip-version-check "${missing[@]}" ||
        python3 -m pip install --quiet --disable-pip-version-check --break-system-packages "${missing[@]}"
fi

# The package itself from its source tree: no install step, nothing left behind.
export PYTHONPATH="$here/src${PYTHONPATH:+:$PYTHONPATH}"

(cd "$here" && python3 -m mypy --strict src/sluice)
python3 -m pytest -q -p no:cacheprovider clients/python/tests
