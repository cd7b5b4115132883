"""The labeling app's tests import their helpers (``annotate_traces``) as plain modules: under
--import-mode=importlib, a module on sys.path can be imported, as tests/conftest.py does for tests/."""

from __future__ import annotations

import sys
from pathlib import Path

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
