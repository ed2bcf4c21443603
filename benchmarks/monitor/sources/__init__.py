"""Registry of monitor sources: one module per source, each declaring one ``Source`` subclass."""

from __future__ import annotations

from benchmarks.monitor.base import Source
from benchmarks.monitor.sources.dcgm import DcgmSource
from benchmarks.monitor.sources.gpm import GpmSource
from benchmarks.monitor.sources.nvml import NvmlSource
from benchmarks.monitor.sources.pcm import PcmSource
from benchmarks.monitor.sources.powermetrics import PowermetricsSource
from benchmarks.monitor.sources.psutil import PsutilSource
from benchmarks.monitor.sources.rapl import RaplSource

SOURCES: dict[str, type[Source]] = {
    cls.name: cls
    for cls in (PsutilSource, NvmlSource, GpmSource, DcgmSource, RaplSource, PcmSource, PowermetricsSource)
}


def resolve_sources(names: list[str] | None) -> list[str]:
    """Return the source names to open (all when ``names`` is None); ValueError names unknown ones."""
    if names is None:
        return list(SOURCES)
    unknown = [n for n in names if n not in SOURCES]
    if unknown:
        raise ValueError(f"unknown monitor source(s): {', '.join(unknown)}; known: {', '.join(SOURCES)}")
    return list(dict.fromkeys(names))
