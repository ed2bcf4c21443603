"""Serializer fields of the API's own (documented in the OpenAPI schema through drf-spectacular)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from benchmarks.schedulers import SCHEDULERS

# Parameters are checked against the chosen scheduler's own model by the run service; this bound only
# keeps a hostile payload small (credit, the largest, has a dozen).
MAX_SCHEDULER_PARAMS = 50


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "enum": sorted(SCHEDULERS), "description": "a scheduler's name"},
            {
                "type": "object",
                "description": (
                    'a scheduler and its parameters, e.g. {"name": "credit", "pressure_threshold": '
                    "0.4}; without 'name', the workflow's scheduler. Each scheduler's parameters, defaults "
                    "and ranges: docs/schedulers.md"
                ),
                "properties": {"name": {"type": "string", "enum": sorted(SCHEDULERS)}},
                "maxProperties": MAX_SCHEDULER_PARAMS + 1,
                "additionalProperties": {
                    "oneOf": [{"type": "number"}, {"type": "string"}, {"type": "boolean"}]
                },
            },
        ]
    }
)
class SchedulerChoiceField(serializers.Field):
    """``"credit"`` or ``{"name": "credit", "pressure_threshold": 0.4}``, read as ``(name, params)``
    (name None: the workflow's scheduler); the service checks the parameters against the scheduler."""

    def to_internal_value(self, data: Any) -> tuple[str | None, dict[str, Any]]:
        if isinstance(data, str):
            return self._name(data), {}
        if not isinstance(data, Mapping):
            raise serializers.ValidationError(
                'give a scheduler name, e.g. "credit", or an object such as '
                '{"name": "credit", "pressure_threshold": 0.4}'
            )
        if len(data) > MAX_SCHEDULER_PARAMS + 1:
            raise serializers.ValidationError(f"at most {MAX_SCHEDULER_PARAMS} scheduler parameters")
        name = data.get("name")
        if "name" in data and not isinstance(name, str):
            raise serializers.ValidationError({"name": "must be a scheduler's name (or leave 'name' out)"})
        params = {k: v for k, v in data.items() if k != "name"}
        bad = {
            k: "must be a number, string or true/false"
            for k, v in params.items()
            if not isinstance(v, str | int | float | bool)
        }
        if bad:
            raise serializers.ValidationError(bad)
        return (self._name(name) if name is not None else None), params

    def to_representation(self, value: Any) -> Any:
        return value

    @staticmethod
    def _name(name: str) -> str:
        if name not in SCHEDULERS:
            raise serializers.ValidationError(f"unknown scheduler '{name}'; known: {', '.join(SCHEDULERS)}")
        return name
