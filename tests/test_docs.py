"""The documentation site builds with ``mkdocs build --strict`` (broken links, missing pages and API
references fail it), as CI runs it (issue 44, item 2). Its pages' commands run in tests/test_readme.py."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path):
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip('mkdocs is not installed: pip install -e ".[docs]" (the test extra includes it)')
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(REPO / "mkdocs.yml"),
                           "-d", str(tmp_path / "site")], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}"
    assert (tmp_path / "site" / "index.html").exists() and (tmp_path / "site" / "api" / "index.html").exists()
