from django.contrib import admin

from cbweb.platforms.models import Platform


@admin.register(Platform)
class PlatformAdmin(admin.ModelAdmin):
    list_display = ("name", "fingerprint_id", "queue", "last_seen_at")
    search_fields = ("name", "fingerprint_id")
