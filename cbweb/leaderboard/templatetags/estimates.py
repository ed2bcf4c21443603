"""``{% estimate e %}``: a mean over runs with its 95 % CI, or the reason it has none (docs/metrics.md)."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html

register = template.Library()


@register.simple_tag
def estimate(e: dict[str, Any] | None, pct: bool = False, digits: int = 2, missing: str = "-") -> str:
    """Render ``{n, mean, low, high, note}`` as "mean [low, high]" plus its note; ``missing`` for None."""
    if e is None:
        return format_html('<span class="muted">{}</span>', missing)
    scale, unit, places = (100.0, " %", 1) if pct else (1.0, "", digits)

    def num(x: float) -> str:
        return f"{x * scale:.{places}f}"

    if e["low"] is None:
        return format_html('{}{} <span class="ci-note">({})</span>', num(e["mean"]), unit, e["note"])
    ci = format_html(
        '<span class="ci" title="95 % confidence interval, n={}">[{}, {}]</span>',
        e["n"],
        num(e["low"]),
        num(e["high"]),
    )
    note = format_html(' <span class="ci-note">({})</span>', e["note"]) if e["note"] else ""
    return format_html("{}{} {}{}", num(e["mean"]), unit, ci, note)


@register.filter
def get_item(mapping: Any, key: str) -> Any:
    """``mapping|get_item:key``: a dict's value for a key held in a variable (None when absent)."""
    return mapping.get(key) if isinstance(mapping, dict) else None
