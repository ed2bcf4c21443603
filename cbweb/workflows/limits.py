"""The engine's input limits as this deployment configures them (settings CB_MAX_*)."""

from __future__ import annotations

from django.conf import settings

from benchmarks.spec import model as spec_model


def spec_limits() -> spec_model.Limits:
    """Return the limits every workflow from a page or the API is loaded with."""
    return spec_model.Limits(
        max_bytes=settings.CB_MAX_SPEC_BYTES,
        max_depth=settings.CB_MAX_SPEC_DEPTH,
        max_values=spec_model.DEFAULT_LIMITS.max_values,
        max_units=settings.CB_MAX_UNITS,
        max_nodes=settings.CB_MAX_NODES,
        max_total_requests=settings.CB_MAX_TOTAL_REQUESTS,
    )
