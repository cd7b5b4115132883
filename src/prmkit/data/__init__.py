"""Public data formats (import / export), step splitters, answer extraction and equivalence, and traces
derived from reference solutions (correct ones, and wrong ones of known error types)."""

from prmkit.data._answers import (
    EQUALITY_METHODS,
    answers_equal,
    extract_answer,
    extract_answer_is,
    extract_boxed,
    extract_gsm8k,
    extract_last_number,
    normalize_answer,
    states_answer,
)
from prmkit.data._convert import convert
from prmkit.data._derive import (
    ERROR_TYPES,
    DeriveReport,
    derive_file,
    derive_traces,
    gsm8k_derived_traces,
    inject_errors,
)
from prmkit.data._export import ExportReport, LossyExportError, trace_losses
from prmkit.data._format import (
    FORMATS,
    Format,
    ImportReport,
    count_records,
    detect_format,
    get_format,
    read,
    record_id,
    register_format,
    scan,
    write,
)
from prmkit.data._gsm8k import parse_calculations
from prmkit.data._hf import (
    arrow_schema,
    decode_rows,
    from_hf_dataset,
    read_parquet,
    to_hf_dataset,
    write_parquet,
)
from prmkit.data._inject import PLAUSIBLE_FACTOR, arith_path_values, plausible
from prmkit.data._prm800k import prm800k_alternatives
from prmkit.data._prmbench import prmbench_original
from prmkit.data._reference import strip_calculations
from prmkit.data._split import (
    SPLITTERS,
    Splitter,
    get_splitter,
    messages_to_trace,
    register_splitter,
    split_trace,
    trace_to_messages,
)
from prmkit.data._stats import TraceStats, compute_stats

__all__ = [
    "FORMATS", "Format", "ImportReport", "ExportReport", "LossyExportError", "trace_losses", "convert",
    "count_records", "detect_format", "get_format", "read", "record_id", "register_format", "scan",
    "write",
    "arrow_schema", "decode_rows", "from_hf_dataset", "read_parquet", "to_hf_dataset",
    "write_parquet",
    "answers_equal", "extract_answer", "extract_answer_is", "extract_boxed", "extract_gsm8k",
    "extract_last_number", "normalize_answer", "states_answer", "arith_path_values", "parse_calculations", "EQUALITY_METHODS",
    "SPLITTERS", "Splitter", "get_splitter", "messages_to_trace", "register_splitter", "split_trace",
    "trace_to_messages",
    "prm800k_alternatives", "prmbench_original",
    "TraceStats", "compute_stats",
    "derive_traces", "gsm8k_derived_traces", "inject_errors", "derive_file", "DeriveReport", "ERROR_TYPES",
    "plausible", "PLAUSIBLE_FACTOR",
    "strip_calculations",
]
