"""MkDocs hook (``hooks:`` in mkdocs.yml): prmkit's docstrings hold doctests written as plain text, and a
doctest line such as ``r["pairs"][0]`` reads to Markdown as a reference link; mkdocs-autorefs then warns that
the target ``0`` does not exist, which ``--strict`` turns into a failed build. Those warnings, for text coming
from ``src/prmkit`` docstrings only, are dropped; a broken link in a docs page still fails the build."""

from __future__ import annotations

import logging


class _DocstringTargets(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        return not ("Could not find cross-reference target" in msg and "/src/prmkit/" in msg)


def on_startup(command: str, dirty: bool) -> None:
    for module in ("plugin", "references", "backlinks"):  # the loggers mkdocs-autorefs warns through
        logging.getLogger(f"mkdocs.plugins.mkdocs_autorefs._internal.{module}").addFilter(_DocstringTargets())
