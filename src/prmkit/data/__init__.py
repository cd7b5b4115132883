"""Public data formats (import / export), step splitters, answer extraction and equivalence."""

from prmkit.data._format import (
    FORMATS,
    Format,
    ImportReport,
    convert,
    detect_format,
    get_format,
    read,
    register_format,
    write,
)

__all__ = ["FORMATS", "Format", "ImportReport", "convert", "detect_format", "get_format", "read",
           "register_format", "write"]
