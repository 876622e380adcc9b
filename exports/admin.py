from django.contrib import admin

from annotation.admin import ReadOnlyAdmin
from exports.models import Release


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
    ]
