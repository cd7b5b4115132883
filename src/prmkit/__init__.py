"""prmkit: process supervision — train, label, use, evaluate and document process reward models."""

from prmkit.errors import FormatError, MissingDependencyError, PrmkitError
from prmkit.trace import (
    Problem,
    Provenance,
    Step,
    StepLabel,
    Trace,
    TraceWriter,
    read_traces,
    write_traces,
)

__version__ = "0.1.0"

__all__ = [
    "__version__", "Trace", "Step", "StepLabel", "Problem", "Provenance", "TraceWriter",
    "read_traces", "write_traces", "PrmkitError", "FormatError", "MissingDependencyError",
]
