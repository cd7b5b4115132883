"""``python -m prmkit.train CONFIG.yaml [--result RESULT.json]``: one training process (what
:func:`prmkit.train.launch` starts on each of its processes)."""

import sys

from prmkit.train._launch import worker

if __name__ == "__main__":
    sys.exit(worker())
