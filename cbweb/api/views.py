"""REST API v1: thin classes that validate input, call one service or selector, serialise the output."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from benchmarks.schedulers import SCHEDULERS
from benchmarks.spec import export as spec_export
from benchmarks.spec.model import WEIGHTS
from cbweb.api import services as api_services
from cbweb.api.errors import ErrorSerializer
from cbweb.api.fields import SchedulerChoiceField
from cbweb.api.filters import MAX_ID, QueryIntegerField, RunFilters, WorkflowFilters, query_values
from cbweb.api.pagination import StrictLimitOffsetPagination
from cbweb.leaderboard import selectors as leaderboard_selectors
from cbweb.platforms import selectors as platform_selectors
from cbweb.runs import dispatch as run_dispatch
from cbweb.runs import selectors as run_selectors
from cbweb.runs import services as run_services
from cbweb.runs.models import Run
from cbweb.workflows import selectors as workflow_selectors
from cbweb.workflows import services as workflow_services

ERROR = ErrorSerializer


class JsonBooleanField(serializers.BooleanField):
    """A JSON boolean, and only that: DRF's BooleanField also takes 0, 1, "yes"... which the schema
    (type: boolean) does not promise."""

    def to_internal_value(self, data: Any) -> bool:
        if type(data) is not bool:
            self.fail("invalid", input=data)
        return data


class ListApi(APIView):
    # A list operation answers {count, next, previous, results} pages (limit/offset); with
    # pagination_class set the schema says so too.
    pagination_class = StrictLimitOffsetPagination

    def page(self, request: Request, items: Any, render: Any) -> Response:
        paginator = self.pagination_class()
        page: list[Any] | None = paginator.paginate_queryset(items, request, view=self)
        return paginator.get_paginated_response([render(item) for item in page or []])


class WorkflowInput(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    # No length of its own: the request body (BoundedJSONParser) and the workflow's bytes (the loader)
    # are both held to CB_MAX_SPEC_BYTES, read when the request comes.
    yaml = serializers.CharField(required=False, trim_whitespace=False)
    spec = serializers.JSONField(required=False, help_text="the workflow as a mapping (native or task-list)")
    description = serializers.CharField(required=False, allow_blank=True, max_length=10_000)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("yaml" in attrs) == ("spec" in attrs):
            raise serializers.ValidationError(
                {"yaml": "give exactly one of 'yaml' (text) and 'spec' (mapping)"}
            )
        return attrs


class WorkflowOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    description = serializers.CharField()
    owner = serializers.CharField(source="owner.username")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    archived = serializers.BooleanField()
    version = serializers.SerializerMethodField()
    spec = serializers.SerializerMethodField()
    yaml = serializers.SerializerMethodField()

    def _latest(self, obj: Any) -> Any:
        if not hasattr(obj, "_latest_version"):
            obj._latest_version = workflow_selectors.version_latest(workflow=obj)
        return obj._latest_version

    def get_version(self, obj: Any) -> int:
        return int(self._latest(obj).number)

    def get_spec(self, obj: Any) -> dict[str, Any]:
        return dict(self._latest(obj).spec)

    def get_yaml(self, obj: Any) -> str:
        return str(self._latest(obj).yaml)


def _filters(filters: type[serializers.Serializer], request: Request, data: Any = None) -> dict[str, Any]:
    """Validate the query parameters of a read with ``filters``; return the values given."""
    return query_values(filters, request.query_params, data)


# Writes that a client may retry safely: sent again with the same Idempotency-Key (and body), they
# answer the first response instead of creating a second run or version (docs/api.md).
IDEMPOTENCY_KEY = "Idempotency-Key"
MAX_IDEMPOTENCY_KEY = 255
# Printable ASCII, space included: what the schema states and the view checks.
IDEMPOTENCY_KEY_PATTERN = rf"[\x20-\x7e]{{1,{MAX_IDEMPOTENCY_KEY}}}"
IDEMPOTENCY_PARAMETER = OpenApiParameter(
    IDEMPOTENCY_KEY,
    str,
    OpenApiParameter.HEADER,
    pattern=f"^{IDEMPOTENCY_KEY_PATTERN}$",
    description="optional: a retry with the same key and body within the retention window "
    "(CB_IDEMPOTENCY_HOURS, 24 h by default) gets the first response again instead of a second write; "
    "the same key with another body is a 422",
)


def _idempotent(request: Request, endpoint: str, call: Callable[[], Response]) -> Response:
    """Answer a write through ``call``, or replay the first answer to its Idempotency-Key."""
    key = request.headers.get(IDEMPOTENCY_KEY)
    if key is None:
        return call()
    if not re.fullmatch(IDEMPOTENCY_KEY_PATTERN, key):
        raise serializers.ValidationError(
            {IDEMPOTENCY_KEY: f"1 to {MAX_IDEMPOTENCY_KEY} printable ASCII characters"}
        )
    body = json.dumps(request.data, sort_keys=True, separators=(",", ":"), default=str)

    def answered() -> tuple[int, Any]:
        response = call()
        return response.status_code, response.data

    code, data, replayed = api_services.idempotent_call(
        user=request.user,
        key=key,
        endpoint=endpoint,
        fingerprint=hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest(),
        call=answered,
    )
    response = Response(data, status=code)
    if replayed:
        response["Idempotent-Replayed"] = "true"
    return response


def _workflow_out(workflow: Any) -> dict[str, Any]:
    return dict(WorkflowOutput(workflow).data)


class WorkflowListApi(ListApi):
    FilterSerializer = WorkflowFilters

    @extend_schema(parameters=[FilterSerializer], responses={200: WorkflowOutput(many=True), 400: ERROR})
    def get(self, request: Request) -> Response:
        v = _filters(self.FilterSerializer, request)
        qs = workflow_selectors.workflow_list(
            owner_id=v.get("owner"), search=v.get("search"), archived=v["archived"]
        )
        return self.page(request, qs, _workflow_out)

    @extend_schema(
        request=WorkflowInput,
        responses={
            201: inline_serializer(
                "WorkflowCreated", {"id": serializers.IntegerField(), "version": serializers.IntegerField()}
            ),
            400: ERROR,
            409: ERROR,
        },
        description="Create a workflow. An owner's active workflows have distinct names: a name you "
        "already use is refused (409; its message names the workflow). To add a version to a workflow "
        "by name, POST to workflows/submit/.",
    )
    def post(self, request: Request) -> Response:
        data = WorkflowInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        workflow = workflow_services.workflow_create(
            owner=request.user,
            name=v["name"],
            yaml_text=v.get("yaml"),
            spec=v.get("spec"),
            description=v.get("description"),
        )
        return Response(
            {"id": workflow.pk, "version": 1, **_workflow_out(workflow)}, status=status.HTTP_201_CREATED
        )


class WorkflowSubmitApi(APIView):
    class SubmitInput(WorkflowInput):
        name = serializers.CharField(
            max_length=200, required=False, help_text="default: the name the workflow gives itself"
        )
        default_name = serializers.CharField(
            max_length=200, required=False, help_text="the name when the workflow gives itself none"
        )

    Submitted = inline_serializer(
        "WorkflowSubmitted",
        {
            "id": serializers.IntegerField(),
            "name": serializers.CharField(),
            "version": serializers.IntegerField(),
            "workflow_created": serializers.BooleanField(),
            "version_created": serializers.BooleanField(),
        },
    )

    @extend_schema(
        request=SubmitInput,
        parameters=[IDEMPOTENCY_PARAMETER],
        responses={200: Submitted, 201: Submitted, 400: ERROR, 422: ERROR},
        description="Store a workflow by name, as `consumerbench submit` does: the caller's workflow of "
        "that name is reused, with a new version only when the spec changed (201 when the workflow is new).",
    )
    def post(self, request: Request) -> Response:
        return _idempotent(request, "workflows.submit", lambda: self._submit(request))

    def _submit(self, request: Request) -> Response:
        data = self.SubmitInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        workflow, version, created, added = workflow_services.workflow_submit(
            owner=request.user,
            yaml_text=v.get("yaml"),
            spec=v.get("spec"),
            name=v.get("name"),
            default_name=v.get("default_name") or "workflow",
        )
        return Response(
            {
                **_workflow_out(workflow),
                "id": workflow.pk,
                "version": version.number,
                "workflow_created": created,
                "version_created": added,
            },
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class WorkflowDetailApi(APIView):
    class UpdateInput(WorkflowInput):
        name = serializers.CharField(max_length=200, required=False)

    @extend_schema(responses={200: WorkflowOutput, 404: ERROR})
    def get(self, request: Request, pk: int) -> Response:
        return Response(_workflow_out(workflow_selectors.workflow_get(pk=pk)))

    @extend_schema(
        request=UpdateInput, responses={200: WorkflowOutput, 400: ERROR, 403: ERROR, 404: ERROR, 409: ERROR}
    )
    def put(self, request: Request, pk: int) -> Response:
        workflow = workflow_selectors.workflow_get(pk=pk)
        data = self.UpdateInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        workflow_services.workflow_update(
            workflow=workflow,
            user=request.user,
            name=v.get("name"),
            yaml_text=v.get("yaml"),
            spec=v.get("spec"),
            description=v.get("description"),
        )
        return Response(_workflow_out(workflow_selectors.workflow_get(pk=pk)))

    @extend_schema(
        responses={204: None},
        description="Delete the workflow and its versions; runs of it (anyone's) keep the spec they ran.",
    )
    def delete(self, request: Request, pk: int) -> Response:
        workflow = workflow_selectors.workflow_get(pk=pk)
        workflow_services.workflow_delete(workflow=workflow, user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class WorkflowArchiveApi(APIView):
    class ArchiveInput(serializers.Serializer):
        archived = JsonBooleanField(default=True, help_text="false: restore the workflow")

    @extend_schema(
        request=ArchiveInput,
        responses={200: WorkflowOutput, 403: ERROR, 404: ERROR, 409: ERROR},
        description="Archive a workflow (hidden from the list, no new runs) or restore it (409 when "
        "you have made another active workflow of its name since).",
    )
    def post(self, request: Request, pk: int) -> Response:
        workflow = workflow_selectors.workflow_get(pk=pk)
        data = self.ArchiveInput(data=request.data)
        data.is_valid(raise_exception=True)
        workflow_services.workflow_archive(
            workflow=workflow, user=request.user, archived=data.validated_data["archived"]
        )
        return Response(_workflow_out(workflow_selectors.workflow_get(pk=pk)))


class WorkflowValidateApi(APIView):
    class Input(WorkflowInput):
        name = serializers.CharField(max_length=200, required=False)

    @extend_schema(
        request=Input,
        responses={
            200: inline_serializer(
                "WorkflowValid",
                {
                    "valid": serializers.BooleanField(),
                    "spec": serializers.JSONField(),
                    "yaml": serializers.CharField(),
                },
            ),
            400: ERROR,
        },
    )
    def post(self, request: Request) -> Response:
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        parsed = workflow_services.workflow_parse(
            name=v.get("name", ""), yaml_text=v.get("yaml"), spec=v.get("spec")
        )
        return Response(
            {"valid": True, "spec": spec_export.to_dict(parsed), "yaml": spec_export.dump_yaml(parsed)}
        )


class RunOutput(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.SerializerMethodField()
    web_url = serializers.SerializerMethodField()
    status = serializers.ChoiceField(choices=Run.Status.choices)
    workflow = serializers.IntegerField(
        source="workflow_version.workflow_id", allow_null=True, help_text="null once the workflow is deleted"
    )
    workflow_name = serializers.CharField(help_text="the workflow's name when the run was launched")
    workflow_version = serializers.IntegerField(source="version_number")
    scheduler = serializers.CharField()
    scheduler_params = serializers.JSONField(
        help_text="the scheduler's effective parameters, defaults filled in (docs/schedulers.md)"
    )
    platform = serializers.IntegerField(source="platform_id", allow_null=True)
    owner = serializers.CharField(source="owner.username")
    batch = serializers.UUIDField()
    repeat_index = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    cancel_requested = serializers.BooleanField()
    error = serializers.CharField()
    progress = serializers.JSONField()
    summary = serializers.JSONField(
        allow_null=True,
        help_text="once finished: headline, partial, requests_served, requests_requested, mean attainment, "
        "fairness, makespan_s, per-application attainment (docs/api.md)",
    )
    commit = serializers.CharField(help_text="the code's commit (hex, lower case), or empty")
    branch = serializers.CharField()
    ci_url = serializers.CharField(help_text="the CI job that submitted the run (http or https), or empty")
    tags = serializers.ListField(child=serializers.CharField(), source="tag_names")
    notes = serializers.CharField()

    def get_url(self, obj: Run) -> str:
        return self.context["request"].build_absolute_uri(reverse("api:run-detail", args=[obj.pk]))

    def get_web_url(self, obj: Run) -> str:
        return self.context["request"].build_absolute_uri(reverse("runs:detail", args=[obj.pk]))


def _run_out(run: Run, request: Request) -> dict[str, Any]:
    return dict(RunOutput(run, context={"request": request}).data)


class RunListApi(ListApi):
    FilterSerializer = RunFilters

    class CreateInput(serializers.Serializer):
        workflow = serializers.IntegerField(min_value=1, max_value=MAX_ID)
        version = serializers.IntegerField(
            required=False, min_value=1, max_value=MAX_ID, help_text="default: latest"
        )
        scheduler = SchedulerChoiceField(
            required=False,
            help_text="a name, or {name, ...parameters}; default: the workflow's scheduler and parameters",
        )
        platform = serializers.IntegerField(
            required=False, allow_null=True, min_value=1, max_value=MAX_ID, help_text="default: any worker"
        )
        repeats = serializers.IntegerField(
            required=False, min_value=1, max_value=run_services.MAX_REPEATS, default=1
        )
        # Run metadata: the types here, the rules (lengths, URL scheme, tag charset) in
        # benchmarks.runmeta, which the service applies.
        commit = serializers.CharField(required=False, allow_blank=True, help_text="4-64 hex digits")
        branch = serializers.CharField(required=False, allow_blank=True)
        ci_url = serializers.CharField(required=False, allow_blank=True, help_text="an http(s) URL")
        tags = serializers.ListField(
            child=serializers.CharField(), required=False, help_text="letters, digits and . _ : + -"
        )
        notes = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
        weights = serializers.ChoiceField(
            choices=WEIGHTS,
            required=False,
            help_text="random: the models' random twins (docs/models.md); default: the workflow's 'weights:'",
        )

    @extend_schema(parameters=[FilterSerializer], responses={200: RunOutput(many=True), 400: ERROR})
    def get(self, request: Request) -> Response:
        qs = run_selectors.run_list(filters=_filters(self.FilterSerializer, request))
        return self.page(request, qs, lambda r: _run_out(r, request))

    @extend_schema(
        request=CreateInput,
        responses={
            201: inline_serializer(
                "RunCreated",
                {
                    "id": serializers.IntegerField(),
                    "url": serializers.URLField(),
                    "status": serializers.ChoiceField(choices=Run.Status.choices),
                    "web_url": serializers.URLField(),
                    "ids": serializers.ListField(child=serializers.IntegerField()),
                },
            ),
            404: ERROR,
            422: ERROR,
            503: ERROR,
        },
        parameters=[IDEMPOTENCY_PARAMETER],
    )
    def post(self, request: Request) -> Response:
        return _idempotent(request, "runs.create", lambda: self._create(request))

    def _create(self, request: Request) -> Response:
        data = self.CreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        workflow = workflow_selectors.workflow_get(pk=v["workflow"])
        if "version" in v:
            version = workflow_selectors.version_get(workflow=workflow, number=v["version"])
        else:
            version = workflow_selectors.version_latest(workflow=workflow)
        platform = platform_selectors.platform_get(pk=v["platform"]) if v.get("platform") else None
        runs = run_dispatch.run_launch(
            version=version,
            user=request.user,
            scheduler=v["scheduler"][0] if "scheduler" in v else None,
            scheduler_params=v["scheduler"][1] if "scheduler" in v else None,
            platform=platform,
            repeats=v["repeats"],
            meta={k: v[k] for k in ("commit", "branch", "ci_url", "tags", "notes") if k in v},
            weights=v.get("weights"),
        )
        out = _run_out(runs[0], request)
        return Response(
            {
                "id": out["id"],
                "url": out["url"],
                "status": out["status"],
                "web_url": out["web_url"],
                "ids": [r.pk for r in runs],
            },
            status=status.HTTP_201_CREATED,
        )


class RunDetailApi(APIView):
    @extend_schema(responses={200: RunOutput, 404: ERROR})
    def get(self, request: Request, pk: int) -> Response:
        return Response(_run_out(run_selectors.run_get(pk=pk), request))

    @extend_schema(responses={204: None, 403: ERROR, 404: ERROR, 409: ERROR})
    def delete(self, request: Request, pk: int) -> Response:
        run_services.run_delete(run=run_selectors.run_get(pk=pk), user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class RunRequestsApi(ListApi):
    class FilterSerializer(serializers.Serializer):
        application = serializers.CharField(required=False, max_length=200, help_text="one application")

    class RequestOutput(serializers.Serializer):
        application = serializers.CharField(source="application.name")
        type = serializers.CharField(source="application.type")
        index = serializers.IntegerField()
        status = serializers.CharField()
        warmup = serializers.BooleanField()
        arrival = serializers.FloatField(help_text="seconds since the run started")
        end = serializers.FloatField()
        metrics = serializers.JSONField(help_text="the request's latencies in seconds (docs/metrics.md)")

    @extend_schema(
        parameters=[FilterSerializer],
        responses={200: RequestOutput(many=True), 400: ERROR, 404: ERROR},
        description="Per-request latencies of a run, in pages (the regression gate compares them).",
    )
    def get(self, request: Request, pk: int) -> Response:
        v = _filters(self.FilterSerializer, request)
        rows = run_selectors.run_requests(run=run_selectors.run_get(pk=pk), application=v.get("application"))
        return self.page(request, rows, lambda r: self.RequestOutput(r).data)


class RunCancelApi(APIView):
    @extend_schema(request=None, responses={200: RunOutput, 403: ERROR, 404: ERROR, 409: ERROR})
    def post(self, request: Request, pk: int) -> Response:
        run = run_services.run_cancel(run=run_selectors.run_get(pk=pk), user=request.user)
        return Response(_run_out(run_selectors.run_get(pk=run.pk), request))


class RunResultApi(APIView):
    @extend_schema(
        responses={200: OpenApiTypes.OBJECT, 404: ERROR},
        description="result.json of a finished run (docs/result-format.md)",
    )
    def get(self, request: Request, pk: int) -> Response:
        document = run_selectors.run_result_document(run=run_selectors.run_get(pk=pk))
        if document is None:
            return Response(
                {"message": f"run {pk} has no result yet", "errors": []}, status=status.HTTP_404_NOT_FOUND
            )
        return Response(document)


class RunTelemetryApi(APIView):
    class FilterSerializer(serializers.Serializer):
        # Not Field.source: DRF's metaclass takes declared fields off the class (the stubs cannot say so).
        source = serializers.CharField(required=False, max_length=50)  # type: ignore[assignment]
        metric = serializers.ListField(
            child=serializers.CharField(max_length=100), required=False, help_text="repeat to ask for several"
        )
        t_min = serializers.FloatField(required=False, help_text="seconds since the run started")
        t_max = serializers.FloatField(required=False)
        points = QueryIntegerField(
            required=False, min_value=3, max_value=20_000, default=run_selectors.CHART_POINTS
        )

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            if (
                attrs.get("t_min") is not None
                and attrs.get("t_max") is not None
                and attrs["t_min"] > attrs["t_max"]
            ):
                raise serializers.ValidationError({"t_min": "t_min must not exceed t_max"})
            return attrs

    @extend_schema(
        parameters=[FilterSerializer],
        responses={
            200: inline_serializer(
                "Telemetry",
                {
                    "run": serializers.IntegerField(),
                    "available": serializers.JSONField(),
                    "series": serializers.JSONField(),
                },
            ),
            400: ERROR,
        },
    )
    def get(self, request: Request, pk: int) -> Response:
        run = run_selectors.run_get(pk=pk)
        data = {**request.query_params.dict(), "metric": request.query_params.getlist("metric")}
        if not data["metric"]:
            data.pop("metric")
        v = _filters(self.FilterSerializer, request, data)
        whole_run = v.get("source") is None and v.get("t_min") is None and v.get("t_max") is None
        if whole_run and v["points"] == run_selectors.CHART_POINTS:
            series = run_selectors.run_telemetry_overview(run=run, metrics_wanted=v.get("metric"))
        else:
            series = run_selectors.run_telemetry(
                run=run,
                source=v.get("source"),
                metrics_wanted=v.get("metric"),
                t_min=v.get("t_min"),
                t_max=v.get("t_max"),
                points=v["points"],
            )
        return Response(
            {"run": run.pk, "available": run_selectors.run_telemetry_metrics(run=run), "series": series}
        )


class PlatformOutput(serializers.Serializer):
    id = serializers.IntegerField()
    fingerprint_id = serializers.CharField()
    name = serializers.CharField()
    info = serializers.JSONField()
    last_seen_at = serializers.DateTimeField(allow_null=True)
    queue = serializers.CharField()


class PlatformListApi(ListApi):
    @extend_schema(responses={200: PlatformOutput(many=True)})
    def get(self, request: Request) -> Response:
        return self.page(request, platform_selectors.platform_list(), lambda p: PlatformOutput(p).data)


class PlatformDetailApi(APIView):
    @extend_schema(responses={200: PlatformOutput, 404: ERROR})
    def get(self, request: Request, pk: int) -> Response:
        return Response(PlatformOutput(platform_selectors.platform_get(pk=pk)).data)


class EstimateOutput(serializers.Serializer):
    n = serializers.IntegerField(help_text="runs that have the figure")
    mean = serializers.FloatField()
    low = serializers.FloatField(allow_null=True, help_text="95 % CI (Student t), from 3 runs on")
    high = serializers.FloatField(allow_null=True)
    note = serializers.CharField(allow_null=True, help_text='"n=2, no CI", "all 3 runs equal"')


class LeaderboardApi(APIView):
    class FilterSerializer(serializers.Serializer):
        workflow = QueryIntegerField(min_value=1, max_value=MAX_ID)
        version = QueryIntegerField(
            required=False, min_value=1, max_value=MAX_ID, help_text="default: every version"
        )
        platform = QueryIntegerField(required=False, min_value=1, max_value=MAX_ID)
        scheduler = serializers.ChoiceField(choices=sorted(SCHEDULERS), required=False)
        since = serializers.DateField(required=False, help_text="launched on or after this day")
        until = serializers.DateField(required=False, help_text="launched on or before this day")
        sort = serializers.ChoiceField(choices=leaderboard_selectors.SORTS, required=False, default="rank")

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            if attrs.get("since") and attrs.get("until") and attrs["since"] > attrs["until"]:
                raise serializers.ValidationError({"until": "the end date is before the start date"})
            return attrs

    class RowOutput(serializers.Serializer):
        rank = serializers.IntegerField(allow_null=True, help_text="null: no SLOs, unranked")
        tied = serializers.BooleanField(help_text="its CI overlaps another row's")
        tied_with = serializers.ListField(child=serializers.IntegerField(allow_null=True))
        platform_id = serializers.IntegerField(allow_null=True)
        platform = serializers.CharField()
        scheduler = serializers.CharField()
        scheduler_label = serializers.CharField()
        scheduler_params = serializers.JSONField()
        runs = serializers.IntegerField()
        run_ids = serializers.ListField(child=serializers.IntegerField())
        versions = serializers.ListField(child=serializers.IntegerField())
        attainment = EstimateOutput(allow_null=True)
        fairness = EstimateOutput(allow_null=True)
        makespan = EstimateOutput(allow_null=True)
        gpu_energy_per_request = EstimateOutput(allow_null=True, help_text="J; null: not measured")
        cpu_energy_per_request = EstimateOutput(allow_null=True, help_text="J; null: not measured")

    @extend_schema(
        parameters=[FilterSerializer],
        responses={
            200: inline_serializer(
                "Leaderboard",
                {
                    "workflow": serializers.IntegerField(),
                    "versions": serializers.ListField(child=serializers.IntegerField()),
                    "rows": RowOutput(many=True),
                },
            ),
            400: ERROR,
            404: ERROR,
        },
        description="One workflow's succeeded runs, one row per platform x scheduler configuration, "
        "ranked by mean SLO attainment with 95 % CIs (docs/web.md#leaderboard).",
    )
    def get(self, request: Request) -> Response:
        v = _filters(self.FilterSerializer, request)
        board = leaderboard_selectors.leaderboard(
            workflow=workflow_selectors.workflow_get(pk=v["workflow"]),
            version=v.get("version"),
            platform=v.get("platform"),
            scheduler=v.get("scheduler"),
            since=v.get("since"),
            until=v.get("until"),
            sort=v["sort"],
        )
        return Response(
            {
                "workflow": v["workflow"],
                "versions": board["versions"],
                "rows": self.RowOutput(board["rows"], many=True).data,
            }
        )
