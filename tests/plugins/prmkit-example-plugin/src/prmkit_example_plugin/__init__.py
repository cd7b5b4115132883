"""An example prmkit plugin: ``example_keywords`` (a labeler) and ``example_step_count`` (a probe),
registered through the ``prmkit.labelers`` and ``prmkit.probes`` entry-point groups."""
