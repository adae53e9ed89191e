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
for mod in pytest fastapi uvicorn flask mypy build; do
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

# The package as pip installs it: requires-python admits exactly the versions mypy checks the
# types as (its oldest), and python -m build makes a wheel and an sdist holding the typed package.
dist="$(mktemp -d)"
trap 'rm -rf "$dist"' EXIT
# From a copy: setuptools writes build/ and *.egg-info next to the sources it builds.
mkdir "$dist/pkg"
cp -r "$here/pyproject.toml" "$here/README.md" "$here/src" "$dist/pkg/"
python3 -m build --sdist --wheel --outdir "$dist" "$dist/pkg" >"$dist/build.log" 2>&1 || {
    cat "$dist/build.log" >&2
    exit 1
}
python3 - "$here/pyproject.toml" "$dist" <<'PY'
import sys, tarfile, tomllib, zipfile
from pathlib import Path

project = tomllib.loads(Path(sys.argv[1]).read_text())
requires = project["project"]["requires-python"]
checked = project["tool"]["mypy"]["python_version"]
assert requires == f">={checked}", f"requires-python {requires!r}, but mypy checks as {checked}"
dist = Path(sys.argv[2])
(wheel,) = dist.glob("*.whl")
(sdist,) = dist.glob("*.tar.gz")
names = set(zipfile.ZipFile(wheel).namelist())
for need in ("sluice/__init__.py", "sluice/asgi.py", "sluice/wsgi.py", "sluice/py.typed"):
    assert need in names, f"{wheel.name} lacks {need}: {sorted(names)}"
assert not any(n.startswith("tests/") for n in names), f"{wheel.name} ships the tests"
members = {m.split("/", 1)[1] for m in tarfile.open(sdist).getnames() if "/" in m}
for need in ("pyproject.toml", "README.md", "src/sluice/py.typed"):
    assert need in members, f"{sdist.name} lacks {need}"
print(f"built {wheel.name} and {sdist.name}")
PY
python3 -m pytest -q -p no:cacheprovider clients/python/tests
