"""Pages of list operations: ``{count, next, previous, results}``, chosen with ``limit`` and ``offset``.

DRF's LimitOffsetPagination quietly replaces a bad ``limit`` or ``offset`` with the default; here
each is checked like any other input (400 naming the parameter), and bounded, as the schema says.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination

MAX_LIMIT = 1000
MAX_OFFSET = 2**31 - 1


def _bounded_int(request: Any, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isascii() or not raw.isdigit() or not low <= int(raw) <= high:
        raise serializers.ValidationError({name: f"must be an integer from {low} to {high}"})
    return int(raw)


class StrictLimitOffsetPagination(LimitOffsetPagination):
    max_limit = MAX_LIMIT

    def get_limit(self, request: Any) -> int:
        return _bounded_int(request, self.limit_query_param, self.default_limit or 50, 1, MAX_LIMIT)

    def get_offset(self, request: Any) -> int:
        return _bounded_int(request, self.offset_query_param, 0, 0, MAX_OFFSET)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        params: list[dict[str, Any]] = super().get_schema_operation_parameters(view)
        bounds = {self.limit_query_param: (1, MAX_LIMIT), self.offset_query_param: (0, MAX_OFFSET)}
        for param in params:
            low, high = bounds[param["name"]]
            param["schema"] = {"type": "integer", "minimum": low, "maximum": high}
        return params
