"""Load and context axes of a run: concurrency steps (``[load]``) and context-depth steps (``[depth]``)."""
