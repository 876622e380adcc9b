from django.contrib import admin

from annotation.admin import ReadOnlyAdmin
from exports.models import Release, ReleaseEvent


@admin.register(Release)
class ReleaseAdmin(ReadOnlyAdmin):
    """Builds are requested on the releases page or the API and written by the worker alone."""

    list_display = ["study", "version", "status", "progress", "requested_by", "created_at", "finished_at"]
    list_filter = ["status", "study"]
    list_select_related = ["study", "requested_by"]
    search_fields = ["study__slug", "version", "sha256"]
    date_hierarchy = "created_at"
    readonly_fields = [
        "public_id",
        "study",
        "requested_by",
        "created_at",
        "finished_at",
        "version",
        "datasets",
        "include_unfinished",
        "license_text",
        "status",
        "progress",
        "error",
        "row_counts",
        "sha256",
        "zip_path",
        "heartbeat_at",
        "task_id",
        "deleted_at",
        "deleted_by",
    ]


@admin.register(ReleaseEvent)
class ReleaseEventAdmin(ReadOnlyAdmin):
    """Who requested, retried or deleted which build, and builds failed for a lost worker: append-only."""

    list_display = ["created_at", "release", "action", "actor"]
    list_filter = ["action"]
    list_select_related = ["release__study", "actor"]
    search_fields = ["release__study__slug", "release__version", "detail"]
    date_hierarchy = "created_at"
    readonly_fields = ["created_at", "release", "action", "actor", "detail"]
