from django.contrib import admin

from cbweb.runs.models import ApplicationResult, NodeResult, RequestResult, Run, TelemetryChunk


class NodeInline(admin.TabularInline):
    model = NodeResult
    extra = 0
    readonly_fields = (
        "name",
        "uses",
        "background",
        "device",
        "status",
        "started_at",
        "finished_at",
        "load_time_s",
        "reason",
    )


class ApplicationInline(admin.TabularInline):
    model = ApplicationResult
    extra = 0
    fields = ("name", "type", "slo_attainment", "requests_counted", "load_time_s")
    readonly_fields = fields


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "workflow_label", "scheduler", "platform", "status", "owner", "created_at")
    list_filter = ("status", "scheduler", "platform")
    search_fields = ("workflow_name", "commit", "branch", "notes", "tags__name")
    # Metadata is written only through run_create, which checks it (benchmarks.runmeta): the run
    # page links ci_url, so an unchecked one must not come in through the admin either.
    readonly_fields = (
        "progress",
        "summary",
        "result",
        "batch",
        "spec",
        "yaml",
        "commit",
        "branch",
        "ci_url",
        "notes",
    )
    inlines = [NodeInline, ApplicationInline]


@admin.register(ApplicationResult)
class ApplicationResultAdmin(admin.ModelAdmin):
    list_display = ("run", "name", "type", "slo_attainment", "requests_counted")


@admin.register(RequestResult)
class RequestResultAdmin(admin.ModelAdmin):
    list_display = ("application", "index", "status", "slo_met", "end")
    list_select_related = ("application",)


@admin.register(TelemetryChunk)
class TelemetryChunkAdmin(admin.ModelAdmin):
    list_display = ("run", "source", "metric", "seq", "count", "t_start", "t_end")
    list_filter = ("source",)
    exclude = ("t", "v")
