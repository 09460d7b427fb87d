"""Lint and type checks of the whole source tree, as part of the README's test command.

``ruff check .`` over the repository, and mypy (``[tool.mypy]`` in pyproject.toml) over the three
folders that ship as the ``robotrl`` package: ``robotrl/``, ``tasks/`` (``robotrl.tasks``) and
``deploy/`` (``robotrl.deploy``). Both tools come with the ``dev`` extra that ``scripts/setup.sh``
installs; without it these tests are skipped with that hint.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_FOLDERS = ("robotrl", "tasks", "deploy")


def _require(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed: pip install -e '.[dev]' (scripts/setup.sh does)")


def test_ruff_reports_no_lint_errors_in_the_repository() -> None:
    _require("ruff")
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"ruff check . failed:\n{result.stdout}{result.stderr}"


@pytest.mark.timeout(900)
def test_mypy_reports_no_type_errors_in_the_shipped_package() -> None:
    _require("mypy")
    from mypy import api

    # the cache folder is git-ignored; a fresh clone pays about a minute on 2 cores, a re-run seconds
    stdout, stderr, status = api.run([*PACKAGE_FOLDERS, "--cache-dir", str(ROOT / ".mypy_cache")])
    assert status == 0, f"mypy {' '.join(PACKAGE_FOLDERS)} found errors:\n{stdout}{stderr}"
    assert "Success" in stdout, stdout
