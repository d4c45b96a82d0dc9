"""The guide's examples (docs/guide/from-python-and-typescript.md): every block marked
`<!-- example: PATH -->` is the file at PATH byte for byte, and the Python ones run
against `assent serve` as written, a person deciding from another process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CHAPTER = ROOT / "docs/guide/from-python-and-typescript.md"
MARKED = re.compile(r"<!-- example: (\S+) -->\n```[\w-]*\n(.*?)```\n", re.S)


def examples() -> list[tuple[str, str]]:
    return MARKED.findall(CHAPTER.read_text())


def test_every_marked_block_is_its_file():
    found = examples()
    assert len(found) >= 2, "the chapter lost its examples"
    for path, block in found:
        assert (ROOT / path).read_text() == block, f"{path} differs from the chapter's block"


@pytest.mark.parametrize(
    ("example", "how", "printed"),
    [
        ("gate.py", ("edit", "--args", '{"order": "A-17", "cents": 3000}'), "refunded 3000 cents on A-17"),
        ("gate.py", ("reject", "--reason", "already refunded"), "not refunded: already refunded"),
        ("langgraph_refund.py", ("confirm",), "refunded 4200 cents on A-17"),
        ("langgraph_refund.py", ("reject", "--reason", "too much"), "too much"),
    ],
)
def test_the_python_examples_run_as_written(server, example, how, printed):
    agent, assent = server.agent()
    join = server.decide_later(agent, *how)
    done = subprocess.run(
        [sys.executable, str(ROOT / "clients/python/examples" / example)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "ASSENT_TOKEN": assent.token},
    )
    join()
    assert done.returncode == 0, done.stderr
    assert printed in done.stdout, done.stdout
    server.verify()
