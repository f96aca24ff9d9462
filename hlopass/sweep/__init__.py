"""Many modules at once: `hlopass sweep` and `hlopass rank`, their engines, jobs and summary table."""
