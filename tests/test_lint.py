"""The linter and the type checker over the whole tree find nothing: ``ruff check`` with
pyproject.toml's ``[tool.ruff]`` (pyflakes, pycodestyle's errors and warnings, bugbear) and
``mypy`` with its ``[tool.mypy]`` (every function's body, but the tests'). A finding that is no
problem gets a ``# noqa: CODE -- why`` or ``# type: ignore[code]  # why`` where it is, not a
rule switched off for everyone.

Pure: they read the sources, nothing is started."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREE = ("debl", "loaders", "coordinator", "tests", "scripts")


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


def test_ruff_finds_nothing():
    done = _run("ruff", "check", "--no-cache", *TREE)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_finds_a_planted_problem(tmp_path):
    """The same configuration on a file with an undefined name, an unused import, a line over
    100 characters and a loop variable bound late: each is found."""
    planted = tmp_path / "planted.py"
    planted.write_text("import os\n\n"
                       "x = undefined_name\n"
                       f"y = '{'a' * 100}'\n"
                       "fs = []\n"
                       "for i in range(3):\n"
                       "    fs.append(lambda: i)\n")
    done = _run("ruff", "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"),
                "--output-format", "concise", str(planted))
    assert done.returncode == 1
    for code in ("F401", "F821", "E501", "B023"):
        assert f" {code} " in done.stdout, done.stdout


def test_mypy_finds_nothing():
    done = _run("mypy")  # the files and settings of pyproject.toml
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_finds_a_planted_problem(tmp_path):
    """The same configuration on a module with a wrong type in a function without annotations
    (checked: ``check_untyped_defs``) and a None used as a record: each is found."""
    planted = tmp_path / "planted.py"
    planted.write_text("from dataclasses import dataclass\n\n"
                       "@dataclass\n"
                       "class Record:\n"
                       "    started: float\n\n"
                       "def untyped():\n"
                       "    count: int = 'many'\n\n"
                       "def started(load: Record | None) -> float:\n"
                       "    return load.started\n")
    done = _run("mypy", "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir",
                str(tmp_path / "cache"), str(planted))
    assert done.returncode == 1
    assert "[assignment]" in done.stdout and "[union-attr]" in done.stdout, done.stdout
