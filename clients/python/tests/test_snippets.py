"""Every FastAPI and Flask app the docs show runs as written.

A block fenced ```python app``` in the repository's README, the book (docs/src) or this
package's README is a whole program: it listens on $PORT and guards GET / with policy "public"
through the client's defaults ($SLUICE_SOCKET). Each is run with this package on its path against
a real sluiced whose "public" allows 3 requests, and must answer 200 three times, then 429 with
Retry-After.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Tuple

import pytest

from conftest import Daemon, free_port, get, unique

PACKAGE = Path(__file__).resolve().parents[1]
REPO = PACKAGE.parents[1]

POLICY = """
[policies.public]
algorithm = "fixed_window"
limit = 3
window = "7d"
"""


def documents() -> List[Path]:
    """The README, the book's pages and this package's README."""
    return [REPO / "README.md", *sorted((REPO / "docs" / "src").rglob("*.md")), PACKAGE / "README.md"]


def app_snippets() -> List[Tuple[str, str]]:
    """(where, code) of every ```python app``` block of the docs."""
    found = []
    for doc in documents():
        lines = doc.read_text().split("\n")
        i = 0
        while i < len(lines):
            fence = re.match(r"^(\s*)```(.*)$", lines[i])
            if not fence:
                i += 1
                continue
            end = i + 1
            while end < len(lines) and not lines[end].strip().startswith("```"):
                end += 1
            info = re.split(r"[\s,]+", fence.group(2).strip())
            if info[0] == "python" and "app" in info:
                indent = len(fence.group(1))
                body = [line[min(indent, len(line) - len(line.lstrip())) :] for line in lines[i + 1 : end]]
                found.append((f"{doc.relative_to(REPO)}:{i + 1}", "\n".join(body) + "\n"))
            i = end + 1
    return found


SNIPPETS = app_snippets()


def test_the_docs_show_a_fastapi_and_a_flask_app() -> None:
    code = "\n".join(c for _, c in SNIPPETS)
    assert len(SNIPPETS) >= 4, [w for w, _ in SNIPPETS]
    assert "from fastapi import" in code
    assert "from flask import" in code


@pytest.mark.parametrize("where,code", SNIPPETS, ids=[w for w, _ in SNIPPETS])
def test_each_app_answers_200_three_times_then_429(
    sluiced_bin: str, workdir: Path, tmp_path: Path, where: str, code: str
) -> None:
    # The daemon's socket in the short workdir: a Unix socket path has ~108 bytes.
    daemon = Daemon(sluiced_bin, workdir, unique("snip"), 'kind = "memory"', POLICY).start()
    app_file = tmp_path / "app.py"
    app_file.write_text(code)
    port = free_port()
    env = dict(os.environ, PORT=str(port), SLUICE_SOCKET=daemon.sock)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE / "src"), env.get("PYTHONPATH")]))
    log = tmp_path / "app.log"
    with open(log, "wb") as out:
        app = subprocess.Popen([sys.executable, str(app_file)], env=env, stdout=out, stderr=out, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 20
        first = None
        while first is None:
            assert app.poll() is None, f"{where}: the app exited {app.returncode}:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"{where}: never listened on $PORT:\n{log.read_text()}"
            try:
                first = get(port, "/")
            except OSError:
                time.sleep(0.05)
        answers = [first, get(port, "/"), get(port, "/"), get(port, "/")]
        assert [a[0] for a in answers] == [200, 200, 200, 429], f"{where}:\n{log.read_text()}"
        assert int(answers[3][1]["retry-after"]) > 0
    finally:
        app.kill()
        app.wait()
        daemon.stop()
