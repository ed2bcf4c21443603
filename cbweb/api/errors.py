"""One JSON error shape for the whole API: ``{"message": ..., "errors": [{"field", "line", "message"}]}``."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from benchmarks.spec.model import WorkflowValidationError
from cbweb.api.services import IdempotencyKeyReused
from cbweb.runs.services import RunStateError
from cbweb.workflows.services import WorkflowNameTaken


class ErrorItemSerializer(serializers.Serializer):
    field = serializers.CharField(
        allow_null=True, help_text="the input field or YAML path, when one is at fault"
    )
    line = serializers.IntegerField(allow_null=True, help_text="the YAML line, when known")
    message = serializers.CharField()


class ErrorSerializer(serializers.Serializer):
    """The body of every API error (the OpenAPI component ``Error``)."""

    message = serializers.CharField(help_text="what went wrong, in one sentence")
    # DRF's metaclass takes declared fields off the class: this does not hide Serializer.errors,
    # but the stubs cannot say so.
    errors = ErrorItemSerializer(  # type: ignore[assignment]
        many=True, help_text="one entry per problem (may be empty)"
    )


def _flatten(detail: Any, field: str | None = None) -> list[dict[str, Any]]:
    if isinstance(detail, dict):
        out = []
        for key, value in detail.items():
            name = key if field is None else f"{field}.{key}"
            out.extend(_flatten(value, None if key in ("non_field_errors", "__all__") else name))
        return out
    if isinstance(detail, list):
        return [e for item in detail for e in _flatten(item, field)]
    return [{"field": field, "line": None, "message": str(detail)}]


def error_response(message: str, errors: list[dict[str, Any]], code: int) -> Response:
    return Response({"message": message, "errors": errors}, status=code)


def workflow_errors(exc: WorkflowValidationError) -> list[dict[str, Any]]:
    """Return the engine's problems as API errors: field = YAML path, line, message."""
    return [{"field": e.path or None, "line": e.line, "message": e.message} for e in exc.errors]


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, WorkflowNameTaken):
        return error_response(exc.errors[0].message, workflow_errors(exc), status.HTTP_409_CONFLICT)
    if isinstance(exc, WorkflowValidationError):
        n = exc.total
        return error_response(
            f"the workflow has {n} problem{'s' if n != 1 else ''}", workflow_errors(exc), 400
        )
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"__all__": exc.messages}
        errors = _flatten(detail)
        return error_response(errors[0]["message"] if errors else "invalid input", errors, 400)
    if isinstance(exc, IdempotencyKeyReused):
        error = {"field": "Idempotency-Key", "line": None, "message": str(exc)}
        return error_response(str(exc), [error], status.HTTP_422_UNPROCESSABLE_ENTITY)
    if isinstance(exc, RunStateError):
        return error_response(str(exc), [], status.HTTP_409_CONFLICT)
    if isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or None)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.NotAuthenticated):
        errors, message = (
            [],
            "authentication required: send 'Authorization: Token <key>' (manage.py create_api_token)",
        )
    elif isinstance(exc, exceptions.ValidationError):
        errors = _flatten(exc.detail)
        message = "; ".join(
            f"{e['field']}: {e['message']}" if e["field"] else e["message"] for e in errors[:3]
        )
    else:
        errors = []
        message = str(getattr(exc, "detail", exc))
    response.data = {"message": message or "invalid input", "errors": errors}
    return response
