"""The OpenAPI schema (drf-spectacular) with every error an operation can answer, in the one error
shape of cbweb/api/errors.py.

Views declare their own successes and the errors only they produce (409, 503, 400 on query filters);
this class adds the errors every operation shares: 401 (a bad token, or a login required), 429 (the
auth-failure, write and anonymous read throttles), 403 and 400 on writes (ownership, CSRF; input),
404 where the path names an object.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers
from rest_framework.permissions import SAFE_METHODS

from cbweb.api.errors import ErrorSerializer
from cbweb.api.permissions import ReadOpenWriteAuthenticated

UNSAFE = ("POST", "PUT", "PATCH", "DELETE")
DESCRIPTIONS = {
    400: "invalid input: `errors` names each field (and YAML line) at fault",
    401: "no or invalid token: send 'Authorization: Token <key>'",
    403: "not allowed: only the owner (or staff) may change this",
    404: "no such object",
    409: "not possible in the object's current state",
    422: "the Idempotency-Key was first used with a different request: send a new key",
    429: "throttled: too many failed tokens, writes or anonymous reads; retry after `Retry-After` seconds",
    503: "a service the operation needs (the run queue) is unavailable; nothing was stored",
}


# What DRF's CharField accepts, as a pattern the schema can state: no NUL character (refused by
# every CharField) and, where the value is trimmed and may not be blank, one non-space character.
ANY_TEXT = r"^[^\u0000]*$"
NOT_BLANK_TEXT = r"^[^\u0000]*[^\s\u0000][^\u0000]*$"


class ApiSchema(AutoSchema):
    def _map_serializer_field(self, field: Any, direction: Any, bypass_extensions: bool = False) -> Any:
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if (
            direction == "request"
            and type(field) is serializers.CharField
            and schema.get("type") == "string"
            and not {"pattern", "format", "enum"} & set(schema)
        ):
            blank_allowed = field.allow_blank or not field.trim_whitespace
            schema["pattern"] = ANY_TEXT if blank_allowed else NOT_BLANK_TEXT
        return schema

    def get_auth(self) -> list[dict[str, Any]]:
        auths: list[dict[str, Any]] = super().get_auth()
        perms = [type(p) for p in self.view.get_permissions()]
        # Reads need no token unless CB_READ_REQUIRES_LOGIN: say so ({} = no authentication).
        if (
            ReadOpenWriteAuthenticated in perms
            and self.method in SAFE_METHODS
            and not settings.CB_READ_REQUIRES_LOGIN
            and {} not in auths
        ):
            auths.append({})
        return auths

    def _error_codes(self) -> set[int]:
        codes = {401, 429}
        if self.method in UNSAFE:
            codes |= {403}
            if self.method != "DELETE":
                codes |= {400}
        if "{" in self.path:
            codes |= {404}
        if self.method == "GET" and self._get_paginator() is not None:
            codes |= {400}  # limit and offset are checked
        return codes

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        bodies: dict[str, Any] = super()._get_response_bodies(direction)
        for code in sorted(self._error_codes()):
            if str(code) not in bodies:
                bodies[str(code)] = self._get_response_for_code(ErrorSerializer, str(code))
        for key, body in bodies.items():
            if key.isdigit() and int(key) in DESCRIPTIONS and not body.get("description"):
                body["description"] = DESCRIPTIONS[int(key)]
        if "429" in bodies:
            bodies["429"]["headers"] = {
                "Retry-After": {
                    "schema": {"type": "integer", "minimum": 0},
                    "description": "seconds until the client may try again",
                }
            }
        return bodies
