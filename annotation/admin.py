from django.contrib import admin
from django.http import HttpRequest

from annotation.models import (
    Annotation,
    ApiToken,
    Assignment,
    AuditEvent,
    CandidatePair,
    Dataset,
    Example,
    GuideAcknowledgement,
    GuideVersion,
    OriginalReport,
    PracticeAttempt,
    PracticeItem,
    Preferences,
    ReaderProfile,
    ReaderQueue,
    Study,
    StudyMember,
    Variation,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    """For records that the application alone writes (ratings, the audit trail)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


class VariationInline(admin.TabularInline):
    model = Variation
    extra = 0


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "reads_per_example", "sampled_at", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    readonly_fields = ["public_id", "sample_seed", "sample_per_variation", "sample_datasets", "sampled_at"]
    inlines = [VariationInline]


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ["key", "name", "study_id_prefix", "numeric_study_ids"]
    search_fields = ["key", "name"]


@admin.register(Variation)
class VariationAdmin(admin.ModelAdmin):
    list_display = ["key", "label", "dimension", "study", "position"]
    list_filter = ["study", "dimension"]
    list_select_related = ["study"]


@admin.register(OriginalReport)
class OriginalReportAdmin(ReadOnlyAdmin):
    """Stored by import_reports; never changed (a rewrite file is joined to them)."""

    list_display = ["source_study_id", "dataset", "source", "created_at"]
    list_filter = ["dataset"]
    list_select_related = ["dataset"]
    search_fields = ["source_study_id"]
    show_full_result_count = False


@admin.register(CandidatePair)
class CandidatePairAdmin(admin.ModelAdmin):
    list_display = ["source_study_id", "dataset", "variation", "verdict", "sampled", "study"]
    list_filter = ["study", "dataset", "verdict", "sampled"]
    list_select_related = ["study", "dataset", "variation"]
    search_fields = ["source_study_id"]
    readonly_fields = ["public_id", "created_at"]
    raw_id_fields = ["variation"]


@admin.register(Example)
class ExampleAdmin(admin.ModelAdmin):
    list_display = ["public_id", "task", "report_type", "pair", "study"]
    list_filter = ["study", "task", "report_type"]
    list_select_related = ["study", "pair__dataset", "pair__variation"]
    raw_id_fields = ["pair"]
    readonly_fields = ["public_id"]


@admin.register(Assignment)
class AssignmentAdmin(ReadOnlyAdmin):
    list_display = ["public_id", "reader", "slot", "status", "example", "created_at"]
    list_filter = ["status", "slot", "example__study"]
    list_select_related = ["reader", "example__pair"]


@admin.register(Annotation)
class AnnotationAdmin(ReadOnlyAdmin):
    list_display = ["public_id", "reader", "task", "rating", "created_at", "voided_at"]
    list_filter = ["task", "rating", "example__study"]
    list_select_related = ["reader"]


@admin.register(StudyMember)
class StudyMemberAdmin(admin.ModelAdmin):
    list_display = ["user", "study", "role", "max_assignments", "active"]
    list_filter = ["study", "role", "active"]
    list_select_related = ["user", "study"]
    raw_id_fields = ["user"]


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "study", "action", "actor", "subject", "example"]
    list_filter = ["study", "action"]
    list_select_related = ["study", "actor", "subject", "example"]


@admin.register(ReaderQueue)
class ReaderQueueAdmin(ReadOnlyAdmin):
    list_display = ["reader", "study", "task", "open_count", "rated_count"]
    list_filter = ["study", "task"]


@admin.register(ReaderProfile)
class ReaderProfileAdmin(admin.ModelAdmin):
    list_display = ["user", "subspecialty"]
    list_filter = ["subspecialty"]
    list_select_related = ["user"]


@admin.register(GuideVersion)
class GuideVersionAdmin(ReadOnlyAdmin):
    """Versions are written from the study's Guide and practice page (or its API); never changed."""

    list_display = ["study", "number", "author", "created_at"]
    list_filter = ["study"]
    list_select_related = ["study", "author"]


@admin.register(GuideAcknowledgement)
class GuideAcknowledgementAdmin(ReadOnlyAdmin):
    list_display = ["reader", "version", "created_at"]
    list_filter = ["study"]
    list_select_related = ["reader", "version__study"]


@admin.register(PracticeItem)
class PracticeItemAdmin(admin.ModelAdmin):
    list_display = ["study", "task", "report_type", "position", "reference_rating", "source"]
    list_filter = ["study", "task"]
    readonly_fields = ["public_id", "content_key", "created_at"]


@admin.register(PracticeAttempt)
class PracticeAttemptAdmin(ReadOnlyAdmin):
    list_display = ["reader", "item", "rating", "rated_at"]
    list_filter = ["study", "task"]
    list_select_related = ["reader", "item"]


@admin.register(Preferences)
class PreferencesAdmin(admin.ModelAdmin):
    list_display = ["user", "theme", "single_key_shortcuts"]
    list_filter = ["theme", "single_key_shortcuts"]
    list_select_related = ["user"]


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    """People make and revoke tokens on their Settings page, coordinators revoke them on the API
    tokens page (both recorded in the person's history here); the key itself is never stored."""

    list_display = ["name", "user", "scope", "prefix", "created_at", "last_used_at"]
    list_filter = ["scope"]
    search_fields = ["name", "user__username"]
