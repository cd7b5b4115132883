"""prmkit's own JSONL: one ``Trace.to_dict()`` per line."""

from __future__ import annotations

from typing import Any

from prmkit._fields import Fields
from prmkit.data._format import Format
from prmkit.trace import Trace


class PrmkitFormat(Format):
    """prmkit traces as JSON Lines (the interchange format; lossless for every field)."""

    name = "prmkit"
    description = "prmkit Trace JSONL (lossless)"
    #: Re-reading prmkit's own files must not stack an "import" entry per read.
    record_import = False
    lossless = True

    @classmethod
    def detect(cls, record: Any) -> bool:
        # prmkit writes the problem as an object and steps as objects; ProcessBench has the same
        # top-level keys but a string problem and string steps.
        if not (isinstance(record, dict) and "id" in record and isinstance(record.get("steps"), list)):
            return False
        steps = record["steps"]
        return isinstance(record.get("problem"), dict) or bool(steps) and isinstance(steps[0], dict)

    def decode(self, f: Fields) -> list[Trace]:
        return [Trace.from_fields(f)]

    def encode(self, trace: Trace) -> dict[str, Any]:
        return trace.to_dict()
