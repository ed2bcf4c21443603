"""Query parameters of reads, checked in one place for the API and the pages alike.

A read's filters are a serializer; the API answers a bad value with its JSON error (400 naming the
parameter), a page with its 400 page (``page_query``). Numbers are ASCII digits only: Python's ``int``
also reads other scripts' digits ('١٢'), and ``str.isdigit`` passes superscripts ('²') that ``int``
then refuses. Text refuses NUL characters (DRF's CharField does), which PostgreSQL cannot store or
compare.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import BadRequest
from django.http import QueryDict
from rest_framework import serializers

from cbweb.runs.models import Run
from cbweb.runs.selectors import (
    HISTORY_ORDERS,
    SEARCH_MAX_WORD,
    SEARCH_MAX_WORDS,
    SEARCH_MIN_WORD,
    SEARCH_PATTERN,
)

MAX_ID = 2**31 - 1

MAX_COMPARE_RUNS = 20
SEARCH_RULE = (
    f"at most {SEARCH_MAX_WORDS} words of {SEARCH_MIN_WORD} to {SEARCH_MAX_WORD} characters, "
    "separated by spaces"
)


class QueryIntegerField(serializers.IntegerField):
    """An integer written in ASCII digits (an optional leading minus sign), bounds as given."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, str):
            text = data.strip()
            if not text.isascii() or not text.removeprefix("-").isdigit():
                self.fail("invalid")
        return int(super().to_internal_value(data))


class QueryBooleanField(serializers.BooleanField):
    """A boolean query parameter, spelled ``true`` or ``false`` as OpenAPI clients send it."""

    def to_internal_value(self, data: Any) -> bool:
        if type(data) is bool:  # the default, when the parameter is absent
            return data
        if data not in ("true", "false"):
            self.fail("invalid", input=data)
        return bool(data == "true")


class RunFilters(serializers.Serializer):
    """The run list's filters: GET /api/v1/runs/ and the runs page."""

    status = serializers.ChoiceField(choices=Run.Status.choices, required=False)
    workflow = QueryIntegerField(required=False, min_value=1, max_value=MAX_ID)
    platform = QueryIntegerField(required=False, min_value=1, max_value=MAX_ID)
    scheduler = serializers.CharField(required=False, max_length=50)
    owner = serializers.CharField(required=False, max_length=150, help_text="username")
    batch = serializers.UUIDField(required=False)
    commit = serializers.RegexField(
        r"^[0-9a-fA-F]{1,64}$", required=False, help_text="runs whose commit starts with this (any case)"
    )
    branch = serializers.CharField(required=False, max_length=200)
    tag = serializers.CharField(required=False, max_length=64, help_text="runs with this tag")
    search = serializers.RegexField(
        SEARCH_PATTERN,
        required=False,
        trim_whitespace=False,
        max_length=SEARCH_MAX_WORDS * (SEARCH_MAX_WORD + 1),
        error_messages={"invalid": SEARCH_RULE},
        help_text=f"{SEARCH_RULE}; each must match (any case) the workflow name, commit, branch, notes "
        "or tags",
    )


class RunCompareFilters(serializers.Serializer):
    """The runs compared on the compare page: ``runs``, repeated."""

    runs = serializers.ListField(
        child=QueryIntegerField(min_value=1, max_value=MAX_ID),
        max_length=MAX_COMPARE_RUNS,
        required=False,
        default=list,
    )


class RunHistoryFilters(serializers.Serializer):
    """A workflow's run history page: ``order`` by time or by commit."""

    order = serializers.ChoiceField(choices=HISTORY_ORDERS, required=False, default="time")


class WorkflowFilters(serializers.Serializer):
    """The workflow list's filters: GET /api/v1/workflows/ and the workflows page."""

    search = serializers.CharField(required=False, max_length=200)
    owner = QueryIntegerField(required=False, min_value=1, max_value=MAX_ID)
    archived = QueryBooleanField(
        required=False, default=False, help_text="true: list the archived workflows instead"
    )


def query_values(
    filters: type[serializers.Serializer],
    query: QueryDict,
    data: Any = None,
    *,
    blank_is_absent: bool = False,
) -> dict[str, Any]:
    """Return the values of ``query`` (or of ``data``, built from it) checked by ``filters``; raise
    serializers.ValidationError naming each bad parameter.

    DRF reads an empty ``?name=`` as "not given"; the API's schema (and its client) mean it as a
    value, so it is refused like any other bad value, unless ``blank_is_absent`` (a page's filter
    form sends its empty fields).
    """
    if blank_is_absent:
        query = query.copy()
        for name in list(query):
            given = [v for v in query.getlist(name) if v != ""]
            if given:
                query.setlist(name, given)
            else:
                del query[name]
    else:
        empty = [name for name in filters().get_fields() if "" in query.getlist(name)]
        if empty:
            raise serializers.ValidationError({name: "must not be empty" for name in empty})
    params = filters(data=query if data is None else data)
    params.is_valid(raise_exception=True)
    return dict(params.validated_data)


def page_query(filters: type[serializers.Serializer], query: QueryDict) -> dict[str, Any]:
    """Return a page's query parameters checked by ``filters`` (empty fields read as not given);
    raise BadRequest (the 400 page) that names each bad parameter."""
    try:
        return query_values(filters, query, blank_is_absent=True)
    except serializers.ValidationError as exc:
        raise BadRequest(error_text(exc.detail)) from None


def error_text(detail: Any) -> str:
    """Return a serializer's errors as one line: ``name: message; name: message``."""
    if isinstance(detail, dict):
        return "; ".join(f"{name}: {error_text(errors)}" for name, errors in detail.items())
    if isinstance(detail, list):
        return " ".join(error_text(e) for e in detail)
    return str(detail)
