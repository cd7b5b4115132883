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
from prmkit.data._hf import (
    arrow_schema,
    decode_rows,
    from_hf_dataset,
    read_parquet,
    to_hf_dataset,
    write_parquet,
)

__all__ = ["arrow_schema", "decode_rows", "from_hf_dataset", "read_parquet", "to_hf_dataset",
           "write_parquet", "FORMATS", "Format", "ImportReport", "convert", "detect_format", "get_format", "read",
           "register_format", "write"]
