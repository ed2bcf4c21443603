from django.contrib import admin

from cbweb.workflows.models import Workflow, WorkflowVersion


class VersionInline(admin.TabularInline):
    model = WorkflowVersion
    fields = ("number", "created_by", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(Workflow)
class WorkflowAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "archived", "updated_at")
    list_filter = ("archived",)
    search_fields = ("name",)
    inlines = [VersionInline]


@admin.register(WorkflowVersion)
class WorkflowVersionAdmin(admin.ModelAdmin):
    list_display = ("workflow", "number", "created_by", "created_at")
    # Versions are immutable: a run points at the exact spec it ran.
    readonly_fields = ("workflow", "number", "spec", "yaml", "created_by", "created_at")
