"""Template filters for the units the run pages show (the charts format alike: static/js/common/charts.js)."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()

_IEC = ("B", "KiB", "MiB", "GiB", "TiB")


@register.filter
def iec_bytes(value: Any) -> str:
    """Return a byte count in IEC units (``1.50 GiB``, ``49.4 MiB``), or "-" when there is none."""
    if value is None or value == "":
        return "-"
    x = float(value)
    i = 0
    while abs(x) >= 1024 and i < len(_IEC) - 1:
        x /= 1024
        i += 1
    if i == 0:
        return f"{round(x)} B"
    return (
        f"{x:.2f} {_IEC[i]}"
        if abs(x) < 10
        else f"{x:.1f} {_IEC[i]}"
        if abs(x) < 100
        else f"{x:.0f} {_IEC[i]}"
    )
