"""The system monitor: GPU, CPU, memory, power and energy sampled beside every run (docs/monitor.md).

- ``sources/``: one plug-in per source (psutil, nvml, gpm, dcgm, rapl, pcm, powermetrics), registry
  in ``sources/__init__.py``;
- ``sampler.py``: the sampling loop; ``process.py``: the same loop in its own process;
- ``telemetry.py``: CSV files and summaries of one run; ``run.py``: what the runner uses;
- ``cli.py``: ``consumerbench monitor``.
"""

from __future__ import annotations

from benchmarks.monitor.sampler import DEFAULT_HZ, MAX_HZ

__all__ = ["DEFAULT_HZ", "MAX_HZ"]
