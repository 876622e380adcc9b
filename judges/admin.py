from django.contrib import admin
from django.http import HttpRequest

from judges.models import JudgeEnrolment, JudgeRead


@admin.register(JudgeEnrolment)
class JudgeEnrolmentAdmin(admin.ModelAdmin):
    list_display = ["judge", "study", "realism", "equivalence", "per_variation", "seed", "created_at"]
    list_filter = ["study"]
    readonly_fields = ["public_id", "study", "judge", "per_variation", "seed", "created_at", "created_by"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # enrolment puts reads in the queue: use the study's Automated judges page


@admin.register(JudgeRead)
class JudgeReadAdmin(admin.ModelAdmin):
    """Written by the application alone (a judge's ratings, like readers' ones, are never edited)."""

    list_display = ["judge", "example", "task", "rating", "rated_at"]
    list_filter = ["study", "task"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
