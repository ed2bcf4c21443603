"""Live progress of a run: the engine's reducer (``benchmarks.progress``), whose state is stored on
``Run.progress``. Kept as the web's import point for the run's sink and services."""

from benchmarks.progress import RunProgress, initial_progress

__all__ = ["RunProgress", "initial_progress"]
