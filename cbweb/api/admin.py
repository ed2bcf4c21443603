"""API tokens in the admin: staff with the token permissions see who holds which token, never a key
(only its digest is stored) and cannot create one here (``manage.py create_api_token`` prints the
key once)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin

from cbweb.api.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "name", "user", "created_at", "last_used_at")
    list_select_related = ("user",)
    search_fields = ("user__username", "name", "prefix")
    fields = ("prefix", "name", "user", "created_at", "last_used_at")
    readonly_fields = ("prefix", "user", "created_at", "last_used_at")

    def has_add_permission(self, request: Any) -> bool:
        return False
